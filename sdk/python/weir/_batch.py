"""The contract's ``batch``: records' bytes in one buffer, four span numbers
and a timestamp per record; and ``packed`` byte strings."""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

#: A record's key offset when it has no key.
NO_KEY = 0xFFFF_FFFF
#: A record's timestamp when it has none.
NO_TIMESTAMP = -(2**63)

#: Records, or bytes of them, an output collects before it is handed over in
#: the middle of a call (the host stages them with the call's other effects).
HAND_OVER_RECORDS = 16_384
HAND_OVER_BYTES = 4 << 20

Record = Tuple[Optional[bytes], bytes, Optional[int]]


def records(data: bytes, spans: List[int], timestamps: List[int]) -> List[Record]:
    """The records of a batch as (key, value, timestamp), checked."""
    n = len(timestamps)
    if len(spans) != 4 * n:
        raise ValueError(f"a batch has {len(spans)} spans for {n} timestamps (4 per record)")
    size = len(data)
    out = []
    append = out.append
    view = memoryview(data)
    for i in range(n):
        ko, kl, vo, vl = spans[4 * i : 4 * i + 4]
        if vo + vl > size or (ko != NO_KEY and ko + kl > size):
            raise ValueError(f"record {i}'s span is outside the batch's {size} bytes")
        t = timestamps[i]
        append(
            (
                None if ko == NO_KEY else bytes(view[ko : ko + kl]),
                bytes(view[vo : vo + vl]),
                None if t == NO_TIMESTAMP else t,
            )
        )
    return out


class OutBatch:
    """Records being built, packed into one buffer."""

    __slots__ = ("data", "spans", "timestamps")

    def __init__(self) -> None:
        self.data = bytearray()
        self.spans: List[int] = []
        self.timestamps: List[int] = []

    def __len__(self) -> int:
        return len(self.timestamps)

    def push(self, key: Optional[bytes], value: bytes, timestamp: Optional[int]) -> None:
        data = self.data
        if key is None:
            ko, kl = NO_KEY, 0
        else:
            ko, kl = len(data), len(key)
            data += key
        vo = len(data)
        data += value
        self.spans += (ko, kl, vo, len(value))
        self.timestamps.append(NO_TIMESTAMP if timestamp is None else timestamp)

    def is_large(self) -> bool:
        return len(self.timestamps) >= HAND_OVER_RECORDS or len(self.data) >= HAND_OVER_BYTES

    def records(self) -> List[Record]:
        return records(bytes(self.data), self.spans, self.timestamps)


def pack(strings: Iterable[bytes]) -> Tuple[bytes, List[int]]:
    """Byte strings as the contract's ``packed``: their bytes and their ends."""
    data = bytearray()
    ends = []
    for s in strings:
        data += s
        ends.append(len(data))
    return bytes(data), ends


def unpack(data: bytes, ends: List[int]) -> List[bytes]:
    """The byte strings of a ``packed``, checked."""
    out = []
    start = 0
    for end in ends:
        if end < start or end > len(data):
            raise ValueError(f"a packed string ends at {end}, outside {start}..{len(data)}")
        out.append(bytes(data[start:end]))
        start = end
    return out
