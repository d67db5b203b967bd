"""tests/measure/interpreter_lookups.py: the interpreter's builtins listed once patch what Triton's own lookup
patches, and Triton's scopes still undo it."""

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _twice(x):
    return x * 2 + tl.where(x < 0, tl.exp(x), 0.0)


@triton.jit
def _twice_kernel(x_ptr, y_ptr, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(y_ptr + i, _twice(tl.load(x_ptr + i)))


def _interp():
    from triton.runtime import interpreter as interp
    if not getattr(interp._patch_builtin, "listed", False):
        pytest.skip("the listed lookup is not installed (not under the interpreter, or another Triton)")
    return interp


def test_the_listed_lookup_patches_the_names_triton_patches():
    interp = _interp()
    for pkg in (tl, tl.core.tensor, tl.math):
        got = []
        for patch in (interp._patch_builtin.original, interp._patch_builtin):
            scope = interp._LangPatchScope()
            patch(pkg, interp.interpreter_builder, scope)
            got.append(sorted(name for _, name, _ in scope._changes))
            scope.restore()
        assert got[0] == got[1] and len(got[0]) > 10, pkg


def test_a_kernel_calling_a_helper_runs_and_leaves_the_language_as_it_was():
    _interp()
    before = {n: getattr(tl, n) for n in ("arange", "load", "store", "exp", "where")}
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty_like(x)
    _twice_kernel[(1,)](x, y, 8)
    assert torch.equal(y, x * 2)
    assert all(getattr(tl, n) is m for n, m in before.items())


def test_kept_numpy_dtypes_are_tritons_own_answers_for_scalars_blocks_and_pointers():
    """The kept _get_np_dtype answers as Triton's own function for every dtype its table holds, for blocks of
    each (unhashable: keyed on their element type) and for pointers and blocks of pointers, asked twice (the
    second answer is the kept one)."""
    interp = _interp()
    kept = interp._get_np_dtype
    original = kept.__closure__ and next((c.cell_contents for c in kept.__closure__
                                          if getattr(c.cell_contents, "__name__", "") == "_get_np_dtype"), None)
    assert getattr(kept, "kept", False) and original is not None and original is not kept
    scalars = [tl.int1, tl.float16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32,
               tl.uint32, tl.int64, tl.uint64, tl.bfloat16, tl.float8e5, tl.float8e4nv]
    cases = [*scalars, tl.pointer_type(tl.float32), tl.pointer_type(tl.uint8)]
    cases += [tl.block_type(t, [4, 8]) for t in cases] + [tl.block_type(tl.float32, [16])]
    for t in cases * 2:
        assert kept(t) == original(t), t
    assert kept(tl.block_type(tl.bfloat16, [2])) != kept(tl.block_type(tl.float32, [2]))  # not one answer for all
