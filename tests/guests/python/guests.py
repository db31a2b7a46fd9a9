"""Python operators for Weir's tests: well-behaved ones and the hostile
catalogue (an exception, an endless loop, a memory bomb)."""

import weir


@weir.map("py-upper")
def upper(line):
    return line.upper()


def parse(line):
    return int(line)


@weir.map("py-raises")
def raises(line):
    try:
        return parse(line)
    except ValueError:
        raise ValueError(f"cannot parse record {line!r} as a number") from None


@weir.map("py-endless")
def endless(line):
    n = 0
    while True:
        n += 1


@weir.map("py-membomb")
def membomb(line):
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))
