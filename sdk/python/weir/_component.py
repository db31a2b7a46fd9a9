"""The component's side of the contract: the ``operators`` export over the
driver, and the host's imports as the driver calls them. Only imported inside
the component (``weir build`` generates the bindings, ``wit_world``)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from componentize_py_types import Err  # type: ignore[import-not-found]
from wit_world import exports  # type: ignore[import-not-found]
from wit_world.imports import host as _host  # type: ignore[import-not-found]
from wit_world.imports import types as _t  # type: ignore[import-not-found]

from ._batch import OutBatch, pack, unpack
from ._context import Codecs, TimeDomain, WindowSpec
from ._driver import Instance, OperatorError, describe
from ._operators import REGISTRY
from .types import text

_KINDS = {
    "map": _t.OperatorKind.MAP,
    "flat-map": _t.OperatorKind.FLAT_MAP,
    "filter": _t.OperatorKind.FILTER,
    "keyed-process": _t.OperatorKind.KEYED_PROCESS,
    "timestamp-assigner": _t.OperatorKind.TIMESTAMP_ASSIGNER,
    "window": _t.OperatorKind.WINDOW,
    "window-process": _t.OperatorKind.WINDOW_PROCESS,
}
_STATE_KINDS = {"value": _t.StateKind.VALUE, "list": _t.StateKind.LIST, "map": _t.StateKind.MAP}
_CODECS = {_t.Codec.JSON: "json", _t.Codec.MSGPACK: "msgpack", _t.Codec.ROW: "row"}
_DOMAINS = {
    TimeDomain.EVENT_TIME: _t.TimeDomain.EVENT_TIME,
    TimeDomain.PROCESSING_TIME: _t.TimeDomain.PROCESSING_TIME,
}
_FROM_DOMAIN = {v: k for k, v in _DOMAINS.items()}
_LEVELS = {
    "debug": _t.LogLevel.DEBUG,
    "info": _t.LogLevel.INFO,
    "warn": _t.LogLevel.WARN,
    "error": _t.LogLevel.ERROR,
}


def _batch(batch: OutBatch) -> Any:
    return _t.Batch(bytes(batch.data), batch.spans, batch.timestamps)


def _packed(p: Tuple[bytes, List[int]]) -> Any:
    return _t.Packed(p[0], p[1])


class WasmHost:
    """The host's imports, as the driver calls them."""

    def declare_state(self, name: str, kind: str) -> int:
        try:
            return _host.declare_state(name, _STATE_KINDS[kind])
        except Err as e:
            raise ValueError(e.value) from None

    def declare_state_ttl(self, name: str, kind: str, ttl_ms: int, refresh_on_read: bool) -> int:
        try:
            return _host.declare_state_ttl(name, _STATE_KINDS[kind],
                                           _t.StateTtl(ttl_ms, refresh_on_read))
        except Err as e:
            raise ValueError(e.value) from None

    def declare_typed_state(self, name: str, kind: str, ttl: Optional[Tuple[int, bool]],
                            value_type: str) -> int:
        try:
            return _host.declare_typed_state(
                name, _STATE_KINDS[kind],
                None if ttl is None else _t.StateTtl(ttl[0], ttl[1]), value_type)
        except Err as e:
            raise ValueError(e.value) from None

    def get_values(self, states: List[int], keys: List[bytes]) -> List[Optional[bytes]]:
        answer, present = _host.get_values(states, _packed(pack(keys)))
        strings = unpack(answer.data, answer.ends)
        return [s if p else None for s, p in zip(strings, present)]

    def get_list(self, state: int, key: bytes) -> List[bytes]:
        return _host.get_list(_t.StateKey(state, key))

    def get_entry(self, state: int, key: bytes, map_key: bytes) -> Optional[bytes]:
        return _host.get_entry(_t.StateKey(state, key), map_key)

    def get_entries(self, state: int, key: bytes) -> List[Tuple[bytes, bytes]]:
        return _host.get_entries(_t.StateKey(state, key))

    def emit(self, batch: OutBatch) -> None:
        _host.emit(_batch(batch))

    def emit_side(self, name: str, batch: OutBatch) -> None:
        _host.emit_side(name, _batch(batch))

    def put_values(self, state: int, keys: Any, values: Any) -> None:
        _host.put_values(state, _packed(keys), _packed(values))

    def update_state(self, ops: List[tuple]) -> None:
        out = []
        for op in ops:
            kind, target = op[0], _t.StateKey(op[1], op[2])
            if kind == "clear":
                out.append(_t.StateOp_Clear(target))
            elif kind == "append-list":
                out.append(_t.StateOp_AppendList(_t.ListWrite(target, op[3])))
            elif kind == "replace-list":
                out.append(_t.StateOp_ReplaceList(_t.ListWrite(target, op[3])))
            elif kind == "put-entry":
                out.append(_t.StateOp_PutEntry(_t.MapPut(target, op[3], op[4])))
            else:
                out.append(_t.StateOp_RemoveEntry(_t.MapRemove(target, op[3])))
        _host.update_state(out)

    def update_timers(self, ops: List[tuple]) -> None:
        out = []
        for register, key, time, domain in ops:
            timer = _t.Timer(key, time, _DOMAINS[domain])
            out.append(_t.TimerOp_Register(timer) if register else _t.TimerOp_Delete(timer))
        _host.update_timers(out)

    def log(self, level: str, message: str) -> None:
        _host.log(_LEVELS[level], message)


HOST = WasmHost()


def _window_spec(spec: Any) -> Optional[WindowSpec]:
    if spec is None:
        return None
    a = spec.assigner
    size = slide = gap = None
    if isinstance(a, _t.WindowAssigner_Tumbling):
        kind, size = "tumbling", a.value
    elif isinstance(a, _t.WindowAssigner_Sliding):
        kind, size, slide = "sliding", a.value.size_ms, a.value.slide_ms
    else:
        kind, gap = "session", a.value
    return WindowSpec(kind, size, slide, gap, _FROM_DOMAIN[spec.domain], spec.allowed_lateness_ms)


def _failed(name: str, e: BaseException) -> Err:
    if isinstance(e, OperatorError):
        return Err(str(e))
    return Err(describe(name, e))


class Operators(exports.Operators):
    """The ``operators`` export: what this component offers."""

    def list_operators(self) -> List[Any]:
        # An operator's declared types, in the type syntax: an untyped one's
        # records are JSON or MessagePack, never rows.
        return [
            _t.OperatorDescriptor(
                e.name, _KINDS[e.kind],
                None if e.input_type is None else text(e.input_type),
                None if e.output_type is None else text(e.output_type),
            )
            for e in REGISTRY.values()
        ]


class Operator:
    """The ``operator`` resource: one created operator of one subtask."""

    instance: Instance

    @classmethod
    def create(cls, name: str, config: List[Tuple[str, str]], window: Any, codecs: Any) -> "Operator":
        c = Codecs(
            input=_CODECS[codecs.input],
            output=_CODECS[codecs.output],
            side_outputs={n: _CODECS[k] for n, k in codecs.side_outputs},
            state=_CODECS[codecs.state],
        )
        try:
            instance = Instance(name, config, _window_spec(window), c, HOST)
        except BaseException as e:
            raise _failed(name, e) from None
        op = cls.__new__(cls)
        op.instance = instance
        return op

    def process(self, records: Any, ctx: Any) -> None:
        i = self.instance
        try:
            i.process(records.data, records.spans, records.timestamps, ctx.watermark,
                      ctx.processing_time)
        except BaseException as e:
            raise _failed(i.name, e) from None

    def on_timer(self, timers: List[Any], ctx: Any) -> None:
        i = self.instance
        try:
            i.on_timer([(t.key, t.time, _FROM_DOMAIN[t.domain]) for t in timers], ctx.watermark,
                       ctx.processing_time)
        except BaseException as e:
            raise _failed(i.name, e) from None

    def accumulate(self, records: Any, accumulators: Any, groups: List[int],
                   targets: List[int]) -> Any:
        i = self.instance
        try:
            accs = unpack(accumulators.data, accumulators.ends)
            out = i.accumulate(records.data, records.spans, records.timestamps, accs, groups,
                               targets)
        except BaseException as e:
            raise _failed(i.name, e) from None
        return _packed(pack(out))

    def fire(self, windows: List[Any], contents: Any, ends: List[int], ctx: Any) -> None:
        i = self.instance
        try:
            i.fire([(w.key, w.start, w.end) for w in windows], contents.data, contents.ends, ends,
                   ctx.watermark, ctx.processing_time)
        except BaseException as e:
            raise _failed(i.name, e) from None
