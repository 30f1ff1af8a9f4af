"""Files of a Hugging Face Hub repo, through huggingface_hub's cache (used by :func:`fetching.fetch`).

huggingface_hub downloads, resumes and revalidates (``ETag``); this module reads the cache location and the
endpoint at call time, bounds the size before downloading, and turns huggingface_hub's errors into
:class:`~speechkit.errors.FetchError` messages naming the file and the repo.

Example:
    >>> path = hub_file("model.ckpt", "org/asr", None, True, None, False, None,  # doctest: +SKIP
    ...                 "'model.ckpt' from Hugging Face repo 'org/asr'")
"""
from __future__ import annotations

import os
import pathlib
from typing import Optional

from speechkit.errors import FetchError, FetchNotFoundError


def hub_cache_dir(cache_dir) -> Optional[str]:
    """The Hub cache, read from the environment at call time (huggingface_hub reads it once at import)."""
    if cache_dir is not None:
        return str(pathlib.Path(cache_dir) / "huggingface")
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def hub_file(filename: str, repo_id: str, revision: Optional[str], online: bool, cache_dir,
             force_download: bool, max_bytes: Optional[int], where: str) -> pathlib.Path:
    """The path of ``filename`` of the Hub repo ``repo_id`` in huggingface_hub's cache, downloaded (or
    revalidated) first when ``online``; a file announced larger than ``max_bytes`` is refused before it is
    downloaded. Every failure is a :class:`FetchError` naming ``where``."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError

    if online and max_bytes is not None:
        _check_hub_size(repo_id, filename, revision, max_bytes, where)
    try:
        path = hf_hub_download(
            repo_id=repo_id, filename=filename, revision=revision, cache_dir=hub_cache_dir(cache_dir),
            local_files_only=not online, force_download=force_download and online,
            # Passed explicitly so that HF_ENDPOINT set after huggingface_hub was imported still counts.
            endpoint=os.environ.get("HF_ENDPOINT") or None,
        )
    except LocalEntryNotFoundError as error:
        if not online and _known_absent(repo_id, filename, revision, cache_dir):
            raise FetchNotFoundError(f"offline (HF_HUB_OFFLINE=1 or allow_network=False): {where} was not in "
                                     "the repo when last asked (recorded in the Hub cache)") from None
        if not online:
            cache = hub_cache_dir(cache_dir) or "(huggingface_hub default)"
            raise FetchError(f"offline (HF_HUB_OFFLINE=1 or allow_network=False): {where} is not in the "
                             f"cache {cache}; fetch it once on a machine with network access into the same "
                             "cache") from None
        raise FetchError(f"cannot fetch {where}: the Hub is unreachable and the file is not cached "
                         f"({error})") from None
    except EntryNotFoundError:
        raise FetchNotFoundError(f"cannot fetch {where}: the repo has no such file") from None
    except RepositoryNotFoundError:
        raise FetchError(f"cannot fetch {where}: no such repo (or it is private and no token was "
                         "given)") from None
    except (OSError, ValueError) as error:
        raise FetchError(f"cannot fetch {where}: {error}") from None
    except Exception as error:  # huggingface_hub's HTTP errors derive from its own hierarchy
        raise FetchError(f"cannot fetch {where}: {type(error).__name__}: {error}") from None
    return pathlib.Path(path)


def _known_absent(repo_id: str, filename: str, revision: Optional[str], cache_dir) -> bool:
    """Whether huggingface_hub's cache recorded ``filename`` as missing from the repo at ``revision`` (it
    does when the Hub answered "entry not found")."""
    from huggingface_hub import _CACHED_NO_EXIST, try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=hub_cache_dir(cache_dir),
                                       revision=revision)
    except Exception:  # noqa: BLE001 (an unreadable cache knows nothing)
        return False
    return found is _CACHED_NO_EXIST


def _check_hub_size(repo_id: str, filename: str, revision: Optional[str], cap: int, where: str) -> None:
    """Refuse a Hub file whose announced size passes ``cap`` before huggingface_hub downloads it (a failed
    metadata request is left to the download, which reports it)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    endpoint = os.environ.get("HF_ENDPOINT") or None
    try:
        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
        size = get_hf_file_metadata(url).size
    except Exception:  # noqa: BLE001 (any failure here is the download's to report)
        return
    if size is not None and size > cap:
        raise FetchError(f"cannot fetch {where}: the server announces {size} bytes, more than the limit of "
                         f"{cap}; refused before downloading")
