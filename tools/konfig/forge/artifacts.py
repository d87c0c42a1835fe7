"""A workflow run's artifact, unpacked: a zip archive another run made, read as hostile data.

The privileged half of the pull-request pipeline reads the unprivileged run's artifacts
(docs/security.md). ``konfig pr --download`` fetches them through
:meth:`konfig.forge.client.GitHub.download_artifact` and unpacks them here, as
actions/download-artifact would, into a folder of their own: every member must be a
plain file with a relative path that stays inside it (no absolute path, no ``..``, no
backslash, no link, no device), and the whole is bounded in size whatever the archive's
headers claim. Nothing of the archive is run; what it holds is checked again by the
command that reads each file (its contract).
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath

from konfig.errors import KonfigError

# What one artifact may unpack to: the Specs of a shard of 1,250 stacks are tens of MB.
MAX_BYTES = 1 << 30
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20


class ArtifactError(KonfigError):
    """An artifact that cannot be unpacked safely (its name and what is wrong)."""


def unpack(data: bytes, dest: Path, *, name: str, limit: int = MAX_BYTES) -> list[str]:
    """Unpack the zip archive ``data`` (artifact ``name``) below the new folder ``dest``;
    the relative paths written, in archive order. ArtifactError, with nothing left
    half-read to trust, for a member that is not a plain file inside ``dest``, or past
    ``limit`` bytes (counted as written, not as declared)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"artifact {name}: not a zip archive ({exc})") from None
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise ArtifactError(f"artifact {name}: {len(members)} members, more than {MAX_MEMBERS}")
    dest.mkdir(parents=True, exist_ok=False)
    written: list[str] = []
    total = 0
    with archive:
        for info in members:
            path = _member_path(info, name)
            if path is None:  # a folder entry
                continue
            target = dest.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, target.open("xb") as out:
                    while chunk := src.read(_CHUNK):
                        total += len(chunk)
                        if total > limit:
                            raise ArtifactError(
                                f"artifact {name}: unpacks to more than {limit} bytes"
                            )
                        out.write(chunk)
            except FileExistsError:
                raise ArtifactError(f"artifact {name}: {path} is in it twice") from None
            except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as exc:
                raise ArtifactError(f"artifact {name}: cannot read {path}: {exc}") from None
            written.append(path.as_posix())
    return written


def _member_path(info: zipfile.ZipInfo, name: str) -> PurePosixPath | None:
    """The member's relative path, None for a folder; ArtifactError when it is not a
    plain file's path that stays inside the artifact's folder."""
    raw = info.filename
    if "\\" in raw or "\0" in raw:
        raise ArtifactError(f"artifact {name}: member {raw!r} has a backslash or a NUL")
    path = PurePosixPath(raw)
    if path.is_absolute() or not path.parts or any(p in ("..", "") for p in path.parts):
        raise ArtifactError(f"artifact {name}: member {raw!r} is not a path inside it")
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no type recorded (a plain file)
    if info.is_dir():
        return None
    if kind not in (0, stat.S_IFREG):
        raise ArtifactError(f"artifact {name}: member {raw!r} is not a plain file")
    return path
