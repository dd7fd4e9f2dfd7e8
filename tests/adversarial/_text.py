"""What the reports must make of hostile text, written here independently of the code under test
(shared by the hostile-cache and hostile-string tests)."""


def escaped(text: str) -> str:
    """``text`` as tritonkit's terminal output must show it (``safe()``'s documented escapes): C0
    controls but tab and newline, DEL and C1 as ``\\xNN``, lone surrogates as ``\\uXXXX``,
    everything else as it is."""
    out = []
    for ch in text:
        c = ord(ch)
        if (c < 0x20 and ch not in "\t\n") or 0x7F <= c < 0xA0:
            out.append("\\x%02x" % c)
        elif 0xD800 <= c < 0xE000:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    return "".join(out)


def squash(text: str) -> str:
    """``text`` without whitespace (rich wraps and pads long text at any column)."""
    return "".join(text.split())


def raw_controls(text: str) -> list:
    """The characters of ``text`` a terminal would act on, or that a UTF-8 stream cannot take."""
    return sorted({repr(ch) for ch in text
                   if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0 or 0xD800 <= ord(ch) < 0xE000})
