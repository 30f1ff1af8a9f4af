"""Where a model's files come from: a local folder, the Hugging Face Hub or a URL.

- :mod:`~speechkit.pretrained.sources.fetching`: ``fetch`` one file into a save folder (``FetchSource``,
  ``FetchFrom``, ``FetchStrategy``), one download per machine under a lock, offline from the cache;
- :mod:`~speechkit.pretrained.sources.download`: the resumable, checked HTTP download behind it;
- :mod:`~speechkit.pretrained.sources.hub_files`: a Hub repo's file URLs and cache layout;
- :mod:`~speechkit.pretrained.sources.limits`: size and time bounds on a non-local source (``SourceLimits``);
- :mod:`~speechkit.pretrained.sources.names`: names that become paths stay inside the save folder.

Nothing here imports torch, so ``speechkit fetch`` starts fast.
"""
