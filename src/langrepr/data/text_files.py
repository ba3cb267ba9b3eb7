"""What the readers say when a data file is not UTF-8 text: one line naming the file and the encoding it is in.

Every reader opens its files as UTF-8. A corpus saved in CP949 (common for Korean text), UTF-16 (Windows
"Unicode") or Latin-1 used to stop with Python's bare "'utf-8' codec can't decode byte 0xb3 in position 4",
which names neither the file nor the fix (issue 21 X16). `not_utf8` turns the decode error into a `UserError`
with the file, the byte offset, the encoding the file most likely is in, and the iconv command that fixes it.
"""

from __future__ import annotations

import codecs
import gzip
import shlex
from pathlib import Path

from langrepr.errors import UserError

BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
        (codecs.BOM_UTF16_BE, "UTF-16"))
# tried in order when charset_normalizer is not installed: the encodings our corpora come in besides UTF-8
FALLBACKS = ("cp949", "shift_jis", "gb18030", "cp1252")
# Latin-script single-byte code pages charset_normalizer cannot tell apart on a few accented words (it said CP775
# for Latin-1 "café in Zürich"); converting from the wrong one garbles the accents, so these are read as CP1252
LATIN_TIES = frozenset({"CP1250", "CP1252", "CP1257", "CP775", "CP850", "CP437", "CP858", "CP1258", "ISO8859-1",
                        "ISO8859-2", "ISO8859-4", "ISO8859-13", "ISO8859-15", "LATIN-1", "MAC-LATIN2", "MAC-ROMAN"})


def _sample(path: Path, size: int = 1 << 16) -> bytes:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as fh:
            return fh.read(size)
    except (OSError, EOFError):
        return b""


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
        return True
    except UnicodeDecodeError:
        return False


def guess_encoding(path: str | Path) -> str:
    """The encoding a non-UTF-8 text file is most likely in ('binary data' when it is not text at all)."""
    data = _sample(Path(path))
    for bom, name in BOMS:
        if data.startswith(bom):
            return name
    if b"\x00" in data:
        return "binary data"
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is None:
            return "binary data"
        name = best.encoding.replace("_", "-").upper()
        if name in LATIN_TIES and _decodes(data, "cp1252"):
            return "CP1252"      # short Western text: the Latin-script single-byte guesses tie; CP1252 is the usual one
        return name
    except ImportError:
        pass
    return next((name.upper() for name in FALLBACKS if _decodes(data, name)), "binary data")


def first_bad_byte(path: str | Path) -> tuple[int, bool, int] | None:
    """(offset of the first byte that is not UTF-8, whether the file just ends inside a character, size).

    The offset of a decode error raised while reading a file in text mode is relative to the chunk the reader
    decoded, not to the file (a UTF-8 file cut inside its last character said "byte 0"); this reads the file
    (decompressed, for .gz) again and counts. None when the file decodes (or cannot be read).
    """
    path = Path(path)
    decoder, consumed = codecs.getincrementaldecoder("utf-8")(), 0
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    return consumed - pending + err.start, False, -1
                consumed += len(chunk)
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as err:
                return consumed - pending + err.start, True, consumed
    except (OSError, EOFError):
        return None
    return None


def not_utf8(path: str | Path, err: UnicodeDecodeError, fix: str = "point the config at the original file"
             ) -> UserError:
    """The one line for a file that is not UTF-8: the file, its likely encoding and the command that fixes it."""
    path = Path(path)
    found = first_bad_byte(path)
    offset = found[0] if found else err.start
    if found and found[1]:   # UTF-8 up to a character its last bytes begin: cut short, not another encoding
        return UserError(f"{path} ends in the middle of a UTF-8 character (byte {offset} of {found[2]}): the file "
                         f"is cut short (a partial copy or download); restore the whole file, or {fix}")
    if path.suffix != ".gz" and _sample(path, 2) == b"\x1f\x8b":   # a .gz saved under the plain name
        q, q_new = shlex.quote(str(path)), shlex.quote(f"{path}.txt")
        return UserError(f"{path} is gzip-compressed, not text: decompress it with `gunzip -c {q} > {q_new} && mv "
                         f"{q_new} {q}`, or {fix}")
    encoding = guess_encoding(path)
    if encoding == "binary data":
        return UserError(f"{path} is not UTF-8 text (byte {offset} cannot be decoded; it looks like binary "
                         f"data): put a UTF-8 text file there, or {fix}")
    q, q_new = shlex.quote(str(path)), shlex.quote(f"{path}.utf8")
    convert = (f"zcat {q} | iconv -f {encoding} -t UTF-8 | gzip" if path.suffix == ".gz"
               else f"iconv -f {encoding} -t UTF-8 {q}")
    return UserError(f"{path} is not UTF-8 text (byte {offset}; it looks like {encoding}): re-encode it with "
                     f"`{convert} > {q_new} && mv {q_new} {q}`, or {fix}")
