"""Every file llmsize reads or writes goes through here, so no input can hang or exhaust memory and no
output can destroy what it should not touch.

Reads: a path is opened without blocking (O_NONBLOCK, so a FIFO cannot hang the open), accepted only if the
opened object is a regular file (fstat after open: FIFOs, devices such as /dev/zero or /dev/urandom, sockets
and folders are refused, symlinks to them included, since the check is on what was opened), and read with a
hard cap (limit + 1 bytes are asked for, more than the limit is refused: st_size is 0 for devices and not
trusted). YAML is parsed with a cap on its size once aliases are expanded (a "billion laughs" document is
refused, not expanded) and duplicate keys are errors; JSON and YAML nesting too deep for the parser is one line.

Writes: the destination is checked with lstat before any work: it must not exist, or be a regular file
(not a symlink, device, FIFO or folder; /dev/null and /dev/full are refused), in an existing folder. The data
go to a new temporary file beside it (O_CREAT | O_EXCL, so nothing existing is opened) that replaces the
destination only once complete; any OSError (read-only folder, disk full, file-size limit, name too long,
/proc) is one line naming the path, and the temporary file is removed.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from llmsize.errors import LlmsizeError, shown, shown_path

KiB, MiB = 2**10, 2**20
YAML_LIMIT_BYTES = 1 * MiB  # a catalog entry or a prices file is a few KB
JSON_LIMIT_BYTES = 20 * MiB  # config.json, hf_quant_config.json, a measure --save file
INDEX_LIMIT_BYTES = 64 * MiB  # model.safetensors.index.json (DeepSeek-V3's is ~9 MB)
YAML_MAX_NODES = 100_000  # after alias expansion; the largest shipped entry has well under 1,000


class FileError(LlmsizeError):
    """An input that is not a readable regular file of bounded size, or an output that cannot be written."""


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return word
    return "not a regular file"


def _why(e: OSError) -> str:
    return e.strerror or e.__class__.__name__


def expand_user(path: Path | str) -> Path:
    """`path` with a leading ~ or ~user made that home folder, as a shell does; a user that does not exist leaves it
    as typed (pathlib's expanduser raises there)."""
    return Path(os.path.expanduser(path))


def exists(path: Path | str) -> bool:
    """Whether `path` names anything (symlinks followed), for an option that takes a value or a path: text the
    system cannot look up as a path (a name too long, a NUL byte) names nothing."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def is_dir(path: Path | str, what: str = "path") -> bool:
    """Whether `path` is a folder (symlinks followed); a path the system cannot even look up (a name too long,
    a loop of symlinks) is one line, not an OSError."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        raise FileError(f"{what} `{shown(path)}`: cannot use this path ({_why(e)}).", "Check the path.") from None
    except ValueError:  # an embedded NUL byte
        raise FileError(f"{what} `{shown(path)}`: not a usable path (NUL byte).", "Check the path.") from None


@contextmanager
def open_regular(path: Path | str, what: str = "file"):
    """A binary file object for `path` if it is a regular file, opened without blocking; yields (f, size)."""
    p = str(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileError(f"{what} `{shown_path(path)}`: not found.", "Check the path.") from None
    except OSError as e:
        raise FileError(f"{what} `{shown_path(path)}`: cannot open ({_why(e)}).",
                        "Check the path and its permissions.") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{what} `{shown_path(path)}` is {_kind(st.st_mode)}, not a regular file.",
                            "Give a regular file.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f, st.st_size


def require_regular(path: Path | str, what: str = "file") -> int:
    """Check that `path` opens as a regular file (for files handed to another library); returns its size."""
    with open_regular(path, what) as (_, size):
        return size


def read_bytes(path: Path | str, limit: int, what: str = "file") -> bytes:
    """The whole of a regular file, refused past `limit` bytes (whatever st_size claims)."""
    with open_regular(path, what) as (f, _):
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise FileError(f"{what} `{shown_path(path)}`: cannot read ({_why(e)}).") from None
    if len(data) > limit:
        raise FileError(f"{what} `{shown_path(path)}` is larger than {limit:,} bytes: too large for this kind of file.",
                        "Check that it is the right file.")
    return data


def read_text(path: Path | str, limit: int, what: str = "file") -> str:
    data = read_bytes(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError(f"{what} `{shown_path(path)}` is not UTF-8 text (byte {e.start:,}).",
                        "Save it as UTF-8, or check that it is the right file.") from None


def parse_json(text: str | bytes, where: str, what: str = "file"):
    """JSON (Python's json: Infinity and NaN accepted, as some configs carry them), one line on any failure."""
    try:
        return json.loads(text)
    except RecursionError:
        raise FileError(f"{what} `{where}`: JSON nested too deeply to read.", "Check the file.") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, integers past Python's digit limit
        msg = str(e).splitlines()[0][:160]
        hint = "Check the file, or download it again."
        if str(where).lower().endswith((".yaml", ".yml")):  # a catalog entry, as `llmsize import -o` writes one
            hint = ("A .yaml file is a catalog entry: put it under DIR/models/ and plan its id with --catalog DIR "
                    "(`llmsize import --help`).")
        raise FileError(f"{what} `{where}`: not valid JSON ({msg}).", hint) from None


def read_json(path: Path | str, what: str = "file", limit: int = JSON_LIMIT_BYTES):
    return parse_json(read_bytes(path, limit, what), str(path), what)


# ------------------------------------------------------------------------------------------ YAML

def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_nodes(root, where: str, what: str) -> None:
    """Duplicate keys, and the document's size with every alias expanded, without expanding anything."""
    import yaml

    size: dict[int, int] = {}
    order, stack, seen = [], [root], set()
    while stack:  # post-order over the node graph (aliases make it a DAG), without recursion
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        if isinstance(node, yaml.MappingNode):
            keys: dict = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    key = (k.tag, k.value)
                    if key in keys:
                        line = k.start_mark.line + 1 if k.start_mark else "?"
                        raise FileError(f"{what} `{where}` line {line}: key `{k.value}` appears twice "
                                        f"(first on line {keys[key]}).", "Keep one of them.")
                    keys[key] = k.start_mark.line + 1 if k.start_mark else "?"
                stack += [k, v]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    for node in reversed(order):
        children = []
        if isinstance(node, yaml.MappingNode):
            children = [c for kv in node.value for c in kv]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        total = 1 + sum(size.get(id(c), 1) for c in children)
        size[id(node)] = total
        if total > YAML_MAX_NODES:
            raise FileError(f"{what} `{where}`: the YAML expands to more than {YAML_MAX_NODES:,} values (aliases "
                            "repeated too often).", "Write the values out, or check that it is the right file.")


def parse_yaml(text: str, where: str, what: str = "file"):
    """Safe YAML, duplicate keys refused, alias expansion bounded; None for an empty document."""
    import yaml

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, where, what)
        return loader.construct_document(node)
    except RecursionError:
        raise FileError(f"{what} `{where}`: YAML nested too deeply to read.", "Check the file.") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise FileError(f"{what} `{where}`{line}: {problem}.", "Fix the YAML syntax.") from None
    except (ValueError, OverflowError) as e:  # a scalar its tag cannot hold: 2024-13-45, !!int "0x", 10**5000
        raise FileError(f"{what} `{where}`: a value YAML cannot read ({str(e).splitlines()[0][:120]}).",
                        "Fix the value (a real date, a number in digits), or quote it as text.") from None
    finally:
        loader.dispose()


def read_yaml(path: Path | str, what: str = "file", limit: int = YAML_LIMIT_BYTES):
    return parse_yaml(read_text(path, limit, what), str(path), what)


# ------------------------------------------------------------------------------------------ writes

def check_output(path: Path | str, what: str = "output", force: bool = True, probe: bool = True) -> Path:
    """Refuse, before any work, a destination llmsize must not replace: anything but a regular file (lstat:
    a symlink is refused too), an existing file unless `force`, or a path whose folder does not exist."""
    p = Path(path)
    if not p.name or p.name in (".", ".."):
        raise FileError(f"{what} `{shown_path(path)}` names a folder, not a file.", "Give a file name.")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise FileError(f"{what} `{shown_path(path)}`: cannot use this path ({_why(e)}).",
                        "Pick another path.") from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"{what} `{shown_path(path)}` exists and is {_kind(st.st_mode)}: llmsize only replaces "
                            "regular files.", "Pick another path.")
        if not force:
            raise FileError(f"{what} `{shown_path(path)}` already exists.",
                            "Pass --force to replace it, or pick another path.")
    parent = p.parent
    try:
        if not stat.S_ISDIR(os.stat(parent).st_mode):
            raise FileError(f"{what} `{shown_path(path)}`: {parent} is not a folder.", "Pick another path.")
    except FileNotFoundError:
        raise FileError(f"{what} `{shown_path(path)}`: folder {parent} does not exist.", "Create it first.") from None
    except OSError as e:
        raise FileError(f"{what} `{shown_path(path)}`: cannot use folder {parent} ({_why(e)}).",
                        "Pick another path.") from None
    if probe:  # a file can be made there (a read-only or virtual folder such as /proc refuses it): before any work
        tmp = parent / f".{p.name[:200]}.{os.getpid()}.probe"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644))
            os.unlink(tmp)
        except OSError as e:
            raise FileError(f"{what} `{shown_path(path)}`: cannot write in {parent} ({_why(e)}).", _advice(e)) from None
    return p


def _advice(e: OSError) -> str:
    return "Free space, or pick another path." if e.errno == errno.ENOSPC else "Pick another path."


def write_output(path: Path | str, data: str | bytes, what: str = "output", force: bool = True) -> None:
    """Write `data` to `path` whole or not at all (see the module docstring)."""
    p = check_output(path, what, force)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name[:200]}.{os.getpid()}.partial")
    fd, created = None, False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        created = True
        view = memoryview(blob)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.close(fd)
        fd = None
        check_output(p, what, force, probe=False)  # nothing special appeared there meanwhile
        os.replace(tmp, p)
    except OSError as e:
        raise FileError(f"{what} `{shown_path(path)}`: cannot write ({_why(e)}).", _advice(e)) from None
    finally:
        if fd is not None:
            os.close(fd)
        if created and os.path.lexists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
