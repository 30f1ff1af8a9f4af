"""``speechkit serve``: model folders behind an HTTP and WebSocket API, with a web page to try them.

The modules, each with one job:

- :mod:`~speechkit.serve.limits`: the limits of a server (sizes, batching, streaming) and their defaults;
- :mod:`~speechkit.serve.models`: the served models, loaded through ``Pretrained.from_hparams``;
- :mod:`~speechkit.serve.audio_input`: request bytes -> mono float32 at the model's rate, or a 4xx error;
- :mod:`~speechkit.serve.batching`: the queue that batches requests arriving together;
- :mod:`~speechkit.serve.streaming`: the streaming-recognition session behind the WebSocket;
- :mod:`~speechkit.serve.access`: who gets in (token, origins), as ASGI middleware;
- :mod:`~speechkit.serve.request_log`: one id per request, in the answer and in the log line;
- :mod:`~speechkit.serve.errors`: the error a request gets (an HTTP status and a message);
- :mod:`~speechkit.serve.app`: the routes (FastAPI);
- :mod:`~speechkit.commands.serve`: the command (``speechkit serve``), run by uvicorn;
- ``static/``: the web page (plain HTML and JavaScript).

The web framework is imported only here, so the rest of speechkit never needs the ``serve`` extra.
See docs/serve.md.
"""
