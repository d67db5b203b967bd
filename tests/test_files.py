"""Inputs never hang or exhaust memory, outputs never destroy anything (llmsize.files and every command that
reads or writes through it). Special files are nodes this test makes in its own temporary folder: FIFOs with
mkfifo, and as root null/zero/full character devices with mknod; never the system's own /dev entries."""

import json
import os
import stat
import subprocess
import sys
import threading

import pytest
from conftest import assert_one_line_error
from stfiles import tiny_llama_folder

from llmsize import files

ROOT = os.geteuid() == 0
NULL, ZERO, FULL = (1, 3), (1, 5), (1, 7)  # Linux mem devices: major 1, minors 3 (null), 5 (zero), 7 (full)


def fifo(path):
    os.mkfifo(path)
    return path


def device(path, numbers):
    if not ROOT:
        pytest.skip("mknod of a character device needs root (CI runs as root)")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*numbers))
    return path


def no_hang(fn, *args, seconds=10):
    """Run fn in a thread; fail (instead of hanging the suite) if it has not returned in time."""
    out = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        # unblock a thread stuck opening or reading a FIFO, so the suite can go on
        for a in args:
            if isinstance(a, (str, os.PathLike)) and os.path.exists(a) and stat.S_ISFIFO(os.stat(a).st_mode):
                with open(a, "wb"):
                    pass
        pytest.fail(f"{fn.__name__}{args} still running after {seconds} s")
    if "error" in out:
        raise out["error"]
    return out.get("value")


# ------------------------------------------------------------------------------------------------ reads


def test_a_fifo_is_refused_without_blocking(tmp_path):
    p = fifo(tmp_path / "config.json")
    with pytest.raises(files.FileError, match=r"is a FIFO \(named pipe\), not a regular file"):
        no_hang(files.read_bytes, p, 100)


def test_a_zero_device_is_refused_before_reading(tmp_path):
    p = device(tmp_path / "zero", ZERO)
    with pytest.raises(files.FileError, match="is a character device, not a regular file"):
        no_hang(files.read_bytes, p, 100)
    link = tmp_path / "link.json"
    link.symlink_to(p)
    with pytest.raises(files.FileError, match="character device"):
        no_hang(files.read_bytes, link, 100)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(files.FileError, match="is a folder"):
        files.read_bytes(tmp_path, 100)


def test_the_cap_is_on_bytes_read_not_on_st_size(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b"x" * 101)
    with pytest.raises(files.FileError, match="larger than 100 bytes"):
        files.read_bytes(p, 100)
    assert files.read_bytes(p, 101) == b"x" * 101


def test_a_symlink_to_a_regular_file_is_read(tmp_path):
    """The Hugging Face cache's snapshots are symlinks to blobs: they must keep working."""
    blob = tmp_path / "blob"
    blob.write_text('{"a": 1}')
    (tmp_path / "config.json").symlink_to(blob)
    assert files.read_json(tmp_path / "config.json") == {"a": 1}


def test_not_utf8_names_the_file(tmp_path):
    p = tmp_path / "h.yaml"
    p.write_bytes(b"id: x\nname: \xff\xfe\n")
    with pytest.raises(files.FileError, match=r"h.yaml` is not UTF-8 text \(byte 12\)"):
        files.read_yaml(p)


def test_deep_json_is_one_line(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(files.FileError, match="nested too deeply"):
        files.read_json(p)


BILLION_LAUGHS = "\n".join(["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
                           + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]"
                              for i in range(8)]) + "\nprices: {h100: 1}\ncurrency: *i\n"


def test_billion_laughs_is_refused_not_expanded(tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text(BILLION_LAUGHS)
    with pytest.raises(files.FileError, match="expands to more than 100,000 values"):
        no_hang(files.read_yaml, p)


@pytest.mark.parametrize("text", ["d: 2024-13-45\n", 'n: !!int "0x"\n', 'f: !!float "abc"\n', "n: " + "9" * 5000 + "\n"])
def test_a_value_its_tag_cannot_hold_is_one_line(text):
    """YAML that parses but whose scalar does not construct (an impossible date, an integer past Python's 4,300
    digits) raised ValueError out of every command that reads a catalog or --prices file."""
    with pytest.raises(files.FileError, match="a value YAML cannot read"):
        files.parse_yaml(text, "t.yaml")


def test_a_few_aliases_are_fine():
    assert files.parse_yaml("a: &x [1, 2]\nb: *x\n", "t") == {"a": [1, 2], "b": [1, 2]}


def test_duplicate_keys_name_both_lines():
    with pytest.raises(files.FileError, match=r"line 3: key `bandwidth_gb_s` appears twice \(first on line 1\)"):
        files.parse_yaml("bandwidth_gb_s: 1\nname: x\nbandwidth_gb_s: 2\n", "t.yaml")
    with pytest.raises(files.FileError, match="key `a` appears twice"):
        files.parse_yaml("top:\n  a: 1\n  a: 1\n", "t.yaml")


# ------------------------------------------------------------------------------------------------ writes


@pytest.mark.parametrize("make, word", [
    (lambda p: fifo(p), "a FIFO"),
    (lambda p: device(p, NULL), "a character device"),
    (lambda p: device(p, FULL), "a character device"),
    (lambda p: p.mkdir(), "a folder"),
])
def test_special_destinations_are_refused_and_kept(tmp_path, make, word):
    dest = tmp_path / "out.json"
    make(dest)
    before = os.lstat(dest)
    with pytest.raises(files.FileError, match=f"exists and is {word}"):
        files.write_output(dest, "{}")
    after = os.lstat(dest)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert sorted(os.listdir(tmp_path)) == ["out.json"]  # no .partial left


def test_a_symlink_destination_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    with pytest.raises(files.FileError, match="a symbolic link"):
        files.write_output(link, "{}")
    assert target.read_text() == "keep me" and link.is_symlink()


def test_an_existing_file_needs_force(tmp_path):
    dest = tmp_path / "a.yaml"
    dest.write_text("old")
    with pytest.raises(files.FileError, match="already exists") as e:
        files.write_output(dest, "new", force=False)
    assert "--force" in e.value.hint
    assert dest.read_text() == "old"
    files.write_output(dest, "new", force=True)
    assert dest.read_text() == "new" and sorted(os.listdir(tmp_path)) == ["a.yaml"]


def test_missing_folder_and_long_name_are_one_line(tmp_path):
    with pytest.raises(files.FileError, match="does not exist"):
        files.write_output(tmp_path / "no" / "a.json", "{}")
    with pytest.raises(files.FileError, match="(File name too long|cannot use this path)"):
        files.write_output(tmp_path / ("x" * 300), "{}")
    assert os.listdir(tmp_path) == []


def test_a_full_disk_leaves_nothing_behind(tmp_path, monkeypatch):
    import errno

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", full)
    with pytest.raises(files.FileError, match="cannot write \\(No space left on device\\)"):
        files.write_output(tmp_path / "a.json", "{}")
    assert os.listdir(tmp_path) == []


def test_a_file_size_limit_leaves_nothing_behind(tmp_path):
    """RLIMIT_FSIZE in a child process: Python ignores SIGXFSZ, so the write fails with EFBIG."""
    import subprocess
    import sys

    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
            "from llmsize.files import write_output, FileError\n"
            "try:\n    write_output(sys.argv[1], 'x' * 5000)\n"
            "except FileError as e:\n    print(e.one_line())\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.json")], capture_output=True, text=True,
                       timeout=60)
    assert "cannot write (File too large)" in r.stdout, r.stderr
    assert os.listdir(tmp_path) == []


def test_a_read_only_folder_is_one_line(tmp_path):
    if ROOT:
        pytest.skip("root writes into read-only folders")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(files.FileError, match="Permission denied"):
            files.write_output(ro / "a.json", "{}")
    finally:
        ro.chmod(0o700)


# ------------------------------------------------------------------------------------------------ commands



def test_measure_save_to_a_device_is_refused_before_the_run(run_cli, tmp_path):
    """`measure --save /dev/full` as root replaced the device node with a JSON file."""
    dest = device(tmp_path / "full", FULL)
    code, out, err = run_cli("measure", "--device", "cpu", "--tokens", "2", "--context", "8", "--save", str(dest))
    assert_one_line_error(code, err)
    assert "exists and is a character device" in err
    assert stat.S_ISCHR(os.lstat(dest).st_mode)


def test_import_refuses_to_overwrite_without_force(run_cli, tmp_path):
    folder = tiny_llama_folder(tmp_path / "m")
    out = tmp_path / "cat" / "models" / "tiny.yaml"
    out.parent.mkdir(parents=True)
    out.write_text("# mine\n")
    code, _, err = run_cli("import", str(folder), "-o", str(out))
    assert_one_line_error(code, err)
    assert "already exists" in err and out.read_text() == "# mine\n"
    code, _, err = run_cli("import", str(folder), "-o", str(out), "--force")
    assert code == 0, err
    assert out.read_text().startswith("# Imported by")
    assert sorted(os.listdir(out.parent)) == ["tiny.yaml"]


@pytest.mark.parametrize("name, why", [("My Model.yaml", "not a catalog id"), ("Tiny.yaml", "not a catalog id")])
def test_import_refuses_an_output_name_that_is_no_catalog_id(run_cli, tmp_path, name, why):
    folder = tiny_llama_folder(tmp_path / "m")
    out = tmp_path / name
    code, _, err = run_cli("import", str(folder), "-o", str(out))
    assert_one_line_error(code, err)
    assert why in err and not out.exists() and sorted(os.listdir(tmp_path)) == ["m"]


@pytest.mark.parametrize("what", ["model", "config", "index", "shard", "hf_quant"])
def test_fifo_inputs_of_a_model_folder_do_not_hang(run_cli, tmp_path, what):
    folder = tiny_llama_folder(tmp_path / "m", shards=2 if what == "index" else 1)
    target = {"model": tmp_path / "fifo-model", "config": folder / "config.json",
              "index": folder / "model.safetensors.index.json", "shard": folder / "model.safetensors",
              "hf_quant": folder / "hf_quant_config.json"}[what]
    if target.exists():
        target.unlink()
    fifo(target)
    arg = str(target) if what == "model" else str(folder)
    code, out, err = no_hang(run_cli, "plan", arg, "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "FIFO" in err


@pytest.mark.parametrize("option", ["--prices", "--calibrate"])
def test_fifo_and_zero_device_option_files(run_cli, tmp_path, option):
    cmd = ["compare", "gemma-4-12b"] if option == "--prices" else ["plan", "gemma-4-12b", "--gpu", "h100"]
    p = fifo(tmp_path / "f")
    code, _, err = no_hang(run_cli, *cmd, option, str(p))
    assert_one_line_error(code, err)
    assert "FIFO" in err
    if ROOT:
        z = device(tmp_path / "z", ZERO)
        code, _, err = no_hang(run_cli, *cmd, option, str(z))
        assert_one_line_error(code, err)
        assert "character device" in err


def test_a_closed_standard_output_is_one_line():
    """`llmsize gpus >&-`: Python starts with sys.stdout None; the final flush raised AttributeError."""
    r = subprocess.run([sys.executable, "-m", "llmsize", "gpus"], capture_output=False, stderr=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "standard output is closed" in r.stderr


def test_a_fifo_in_a_catalog_folder_is_one_line_for_unrelated_commands(run_cli, tmp_path):
    (tmp_path / "hardware").mkdir()
    fifo(tmp_path / "hardware" / "mycard.yaml")
    for args in (["gpus"], ["compare", "gemma-4-12b"], ["plan", "gemma-4-12b", "--gpu", "h200"]):
        code, _, err = no_hang(run_cli, *args, "--catalog", str(tmp_path))
        assert_one_line_error(code, err)
        assert "mycard.yaml` is a FIFO" in err


def test_zero_device_as_model_path_and_config(run_cli, tmp_path):
    z = device(tmp_path / "zero", ZERO)
    code, _, err = no_hang(run_cli, "plan", str(z), "--gpu", "h100")
    assert_one_line_error(code, err)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").symlink_to(z)
    code, _, err = no_hang(run_cli, "plan", str(folder), "--gpu", "h100")
    assert_one_line_error(code, err)
    assert "character device" in err


def test_billion_laughs_in_prices_is_one_line(run_cli, tmp_path):
    p = tmp_path / "prices.yaml"
    p.write_text(BILLION_LAUGHS)
    code, _, err = no_hang(run_cli, "compare", "gemma-4-12b", "--prices", str(p))
    assert_one_line_error(code, err)
    assert "expands to more than" in err


def test_not_utf8_catalog_file_is_one_line(run_cli, tmp_path):
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "x.yaml").write_bytes(b"id: x\nname: \xe9\n")
    code, _, err = run_cli("gpus", "--catalog", str(tmp_path))
    assert_one_line_error(code, err)
    assert "x.yaml` is not UTF-8" in err


def test_chart_output_to_a_device_is_refused(run_cli, tmp_path):
    pytest.importorskip("matplotlib")
    dest = device(tmp_path / "null.png", NULL)
    code, _, err = run_cli("kv", "gemma-4-12b", "-o", str(dest))
    assert_one_line_error(code, err)
    assert stat.S_ISCHR(os.lstat(dest).st_mode)


def test_measure_save_writes_a_whole_json(run_cli, tmp_path):
    pytest.importorskip("torch")
    dest = tmp_path / "run.json"
    code, _, err = run_cli("measure", "--device", "cpu", "--tokens", "2", "--context", "8", "--warmup", "1",
                           "--no-probe", "--save", str(dest), "--json")
    assert code == 0, err
    assert "achieved" in json.loads(dest.read_text()) and sorted(os.listdir(tmp_path)) == ["run.json"]
    code, _, err = run_cli("measure", "--device", "cpu", "--tokens", "2", "--context", "8", "--save", str(dest))
    assert_one_line_error(code, err)
    assert "already exists" in err


def test_measure_checkpoint_fifo_does_not_hang(run_cli, tmp_path):
    pytest.importorskip("torch")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    fifo(folder / "config.json")
    code, _, err = no_hang(run_cli, "measure", "--device", "cpu", "--checkpoint", str(folder), "--tokens", "2",
                           "--context", "8")
    assert_one_line_error(code, err)
    assert "FIFO" in err
