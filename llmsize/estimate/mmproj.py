"""A model's vision (or audio) tower as llama.cpp loads it: the mmproj file beside the GGUF (convert_hf_to_gguf.py
--mmproj writes it; llama-server --mmproj FILE loads it, tools/mtmd/clip.cpp), on the first GPU (clip.cpp
initialises the first GPU-type device, not --main-gpu; --no-mmproj-offload keeps it on the CPU), and since
llama.cpp PR #21489 (2026-04-05) added to --fit's margin on that device, so that the text model's fit leaves room.

    weights = the tower's parameters x the file type's bits (F16 or BF16 16, F32 32, Q8_0 8.5)
    compute = n x 4 B x (I + 3h)  +  n^2 x heads x 4 B without flash attention

The weights leave out that the converter keeps vectors, patch and position embeddings in F32: 1-1.5% low against
the sizes llama.cpp prints (`load_hparams: model size`): Gemma 3 4B 800.7 MiB where 811.79 MiB is printed (llama.cpp
PR #22790's log), Qwen3.5-4B 636.1 where 644.26 (PR #22673's thread).

The compute buffer is what clip.cpp reserves at its warm-up image (n patches, `warmup: ... image size`): the
encoder's MLP at its widest, its n x I activation in f32 beside three n x h tensors (the residual stream, the normed
input, the projection's output), and without flash attention (--flash-attn off) the n x n scores of each head. A head
size the backend's kernel lacks turns it off under --flash-attn auto (Llama 4's 88 on CUDA, llama.cpp#19308,
2026-02-03; PR #20375 proposed one): its 577^2 x 16 x 4 B = 21 MB of scores are not counted here. The 3 is read off Gemma 3's log
(896 x 896, 4,096 patches: "CUDA0 compute buffer size = 121.25 MiB" with flash attention, PR #22790); the rule then
gives Qwen3.5-4B 231.4 MiB where its log prints 223.30 (+3.6%), a 27B Qwen3.5/3.6 tower (projection_dim 5120, BF16)
250.6 where 248.10 (+1.0%, ollama#17482), and Gemma 3 without flash attention 1,145.3 where 1,132.00 (+1.2%, PR
#16837 on Metal). An image larger than the warm-up grows the buffer as it is encoded (clip_image_batch_encode
allocates again: Qwen's up to 4,096 tokens against the warm-up's 2,116).

Warm-up images (clip.cpp, as the file index holds it @0024aa74): SigLIP (Gemma 3) and Llama 4 at their native size
(Llama 4 with its class token: 577 positions at 336 px); Qwen2/2.5/3-VL and Qwen3.5 at 46 x 46 tokens
(set_warmup_n_tokens(46*46)) of merge^2 patches each; Gemma 4 at 256 tokens (set_warmup_n_tokens(256)) of merge^2.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmsize.catalog.schema import ExtraParams, ModelSpec, VisionEncoder
from llmsize.errors import InvalidValueError

MMPROJ_BITS = {"f16": 16.0, "bf16": 16.0, "f32": 32.0, "q8_0": 8.5}  # convert_hf_to_gguf.py --outtype for --mmproj
F32 = 4
QWEN_WARMUP_TOKENS = 46 * 46
GEMMA4_WARMUP_TOKENS = 256
# encoders whose images may be larger than the warm-up's, growing the buffer as they are encoded (Qwen's up to 4,096
# tokens, set_limit_image_tokens(8, 4096); Gemma 4's up to 280, set_limit_image_tokens(252, 280)); SigLIP and Llama 4
# encode images resized to their native size
DYNAMIC_KINDS = ("qwen_vl", "gemma4")
MLP_BESIDE = 3  # n x h tensors alive beside the MLP's activation (read off Gemma 3's logged buffer)


def warmup_patches(e: VisionEncoder) -> int:
    """The patches (positions) of the image clip.cpp warms the encoder up with."""
    if e.kind == "qwen_vl":
        return QWEN_WARMUP_TOKENS * e.merge ** 2
    if e.kind == "gemma4":
        return GEMMA4_WARMUP_TOKENS * e.merge ** 2
    side = (e.image_size or 0) // e.patch_size
    return side * side + (1 if e.kind == "llama4" else 0)


def encoder_compute_bytes(e: VisionEncoder, flash_attn: bool) -> int:
    """The encoder's compute buffer at its warm-up image (the module's rule)."""
    n = warmup_patches(e)
    scores = 0 if flash_attn else n * n * e.num_heads * F32
    return n * F32 * (e.intermediate_size + MLP_BESIDE * e.hidden_size) + scores


def towers(model: ModelSpec) -> list[ExtraParams]:
    """The model's towers (its extras other than an MTP module), loaded by the runtime or not: what an mmproj
    file holds."""
    from llmsize.estimate.speculative import MTP_WORDS

    return [x for x in model.extra if MTP_WORDS not in x.name.lower()]


@dataclass(frozen=True)
class MmprojFile:
    """What an mmproj file's header says (importer/mmproj_file.py reads it): its tensors' bytes and elements, its
    matrices' ggml type, and its vision encoder's shape where the header gives it all (None: not)."""

    path: str
    weight_bytes: int
    params: int
    file_type: str  # the ggml type of most of its matrices' bytes: f16, bf16, q8_0, ...
    encoder: VisionEncoder | None
    projection_dim: int | None = None  # clip.vision.projection_dim: the text model's width it feeds


@dataclass(frozen=True)
class Projector:
    """The mmproj file's weights and its encoders' compute buffers (None: an encoder's shape is not catalogued)."""

    file_type: str
    params: int
    weight_bytes: int
    compute_bytes: int | None
    warmup_patches: tuple[int, ...]  # each catalogued encoder's
    flash_attn: bool
    grows: bool = False  # an encoder takes images larger than its warm-up one (dynamic resolution: DYNAMIC_KINDS)

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + (self.compute_bytes or 0)


def check_mmproj_type(file_type: str | None) -> str | None:
    """--mmproj's type, lower-cased; refused where it is not one the converter writes an mmproj in."""
    if file_type is None:
        return None
    if file_type.strip().lower() not in MMPROJ_BITS:
        from llmsize.errors import not_one_of

        raise InvalidValueError(f"--mmproj {not_one_of(file_type, list(MMPROJ_BITS))}.",
                                "Give the type convert_hf_to_gguf.py --mmproj writes it in (--outtype), or the "
                                "path of an mmproj file.")
    return file_type.strip().lower()


def tower_names(model: ModelSpec, source: str | MmprojFile) -> str:
    """What the plan calls the tower an mmproj holds: the model's towers for a type, the file's for a file (which
    may hold another tower than the entry's)."""
    if isinstance(source, MmprojFile):
        return f"the tower in {mmproj_label(source).split(',')[0]}"
    return " and ".join(x.name for x in towers(model))


def mmproj_label(source: str | MmprojFile) -> str:
    """How reports name an mmproj: its type (F16), or its file's name and type."""
    if isinstance(source, MmprojFile):
        return f"{source.path.replace(chr(92), '/').rsplit('/', 1)[-1]}, {source.file_type.upper()}"
    return source.upper()


def projector(model: ModelSpec, source: str | MmprojFile, flash_attn: bool) -> Projector:
    """The mmproj of `model` in a file type (check_mmproj_type's: the model's towers at its bits), or a file's own
    (its tensors' bytes, its header's encoder); refused where a type is asked of a model without a tower."""
    if isinstance(source, MmprojFile):
        e = source.encoder
        width = getattr(model, "hidden_size", None)
        if source.projection_dim and width and source.projection_dim != width:
            raise InvalidValueError(f"--mmproj {mmproj_label(source).split(',')[0]}: its tower feeds a text model "
                                    f"{source.projection_dim:,} wide (clip.vision.projection_dim), and {model.name}'s "
                                    f"hidden size is {width:,}: it is another model's mmproj.",
                                    "Give the mmproj file published with this model.")
        return Projector(source.file_type, source.params, source.weight_bytes,
                         None if e is None else encoder_compute_bytes(e, flash_attn),
                         () if e is None else (warmup_patches(e),), flash_attn,
                         e is not None and e.kind in DYNAMIC_KINDS)
    file_type = source
    bits = MMPROJ_BITS[check_mmproj_type(file_type)]
    found = towers(model)
    if not found and model.release.quant.startswith("gguf-"):  # a GGUF file's model: the text model alone
        raise InvalidValueError(f"--mmproj {file_type}: {model.name} is a GGUF file, which holds the text model "
                                "alone; a type sizes the tower a model's entry or config.json describes.",
                                "Give its mmproj file (--mmproj mmproj-F16.gguf, published beside the GGUF), or "
                                "drop --mmproj.")
    if not found:
        raise InvalidValueError(f"--mmproj: {model.name} has no vision or audio tower (none among its extra "
                                "parameters, as its entry or config.json gives them).", "Drop --mmproj.")
    params = sum(x.params for x in found)
    encoders = [x.encoder for x in found if x.encoder is not None]
    compute = (sum(encoder_compute_bytes(e, flash_attn) for e in encoders)
               if len(encoders) == len(found) else None)
    return Projector(file_type.lower(), params, int(params * bits / 8), compute,
                     tuple(warmup_patches(e) for e in encoders), flash_attn,
                     any(e.kind in DYNAMIC_KINDS for e in encoders))


def projector_holds(p: Projector) -> str:
    """What a ledger's mmproj row holds, in words: the tower and its encoder's buffer, or its weights alone where
    the encoder's shape is not known (projector_note says so)."""
    return ("its weights and its encoder's buffer, as the notes say" if p.compute_bytes is not None else
            "its weights alone: its encoder's buffer is not counted, as the notes say")


def projector_note(p: Projector, names: str, on_host: bool = False) -> str:
    """What the plan says of the mmproj it holds in the ledger (`on_host`: on the CPU, --no-mmproj-offload)."""
    what = (f"{names}, {p.params / 1e9:,.2f} B parameters: the mmproj file in {p.file_type.upper()}, "
            f"{p.weight_bytes / 1e9:,.2f} GB")
    if p.compute_bytes is None:
        what += ", and its encoder's compute buffer, not counted (the encoder's shape is not known here)"
    else:
        fa = "with flash attention" if p.flash_attn else "without flash attention: its scores in memory"
        what += (f", and its encoder's compute buffer, {p.compute_bytes / 1e9:,.2f} GB at llama.cpp's warm-up image "
                 f"({' + '.join(f'{n:,}' for n in p.warmup_patches)} patches, {fa}"
                 + ("; a larger image grows it)" if p.grows else ")"))
    if on_host:
        return what + ("; in the ledger on the CPU: Ollama passes --no-mmproj-offload where num_gpu leaves layers off "
                       "the card (--gpu-layers; its own placement keeps the projector on the GPU)")
    return what + ("; in the ledger on the first GPU, as llama-server --mmproj loads it (--no-mmproj-offload keeps "
                   "it on the CPU)")
