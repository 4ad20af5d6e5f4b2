"""Engine release strings read once: "0.7.4.dev181+gf35f8e22", "v0.7.0", "0.4.3.post2",
"0.7.3 (ROCm)", "1.0.0rc2" as (major, minor, patch).

The forms are those engines print (vLLM's `vllm --version` and its setuptools-scm dev builds,
SGLang's `.postN` releases, TensorRT-LLM's `rcN`) and those public results quote, with an
image tag's note after a space. Every reader of a version (vLLM's V0/V1 switch, vLLM 0.7's MLA
memory rule, an engine's era, the CLI's `--engine-version`) goes through `engine_release`.
"""

from __future__ import annotations

import re

# major.minor[.patch][.postN|.devN|rcN|aN|bN...][+local]: PEP 440 as engines tag releases
_STRICT = re.compile(
    r"v?\d+\.\d+(\.\d+)?([.-]?(dev|post|rc|a|b)\d+)*(\+[0-9a-z.]+)?", re.IGNORECASE
)


def engine_release(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a release string (module docstring); a missing patch reads 0;
    None when no major.minor can be read."""
    head = version.strip().lower().removeprefix("v").split(" ")[0]
    parts: list[int] = []
    for piece in head.split(".")[:3]:
        digits = re.match(r"\d+", piece)  # "1rc1" -> 1; "dev181" ends the release
        if digits is None:
            break
        parts.append(int(digits.group()))
    if len(parts) < 2:
        return None
    return (parts[0], parts[1], parts[2] if len(parts) > 2 else 0)


def is_release(text: str) -> bool:
    """Whether `text` is one release string alone (what `--engine-version` accepts): the forms
    above without a note after them."""
    return _STRICT.fullmatch(text.strip()) is not None  # so engine_release reads it too
