"""The routes of ``speechkit serve`` (FastAPI): the HTTP API, the streaming WebSocket and the web page.

Example:
    >>> models = load_models([parse_model_spec("asr=results/asr-model")])  # doctest: +SKIP
    >>> app = create_app(models, ServeLimits(), token=None)                # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=8000)                      # doctest: +SKIP
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import pathlib
import uuid
import zipfile
from typing import Optional

import numpy as np
import soundfile
import torch
from fastapi import FastAPI, Request, WebSocket
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartParser
from starlette.requests import ClientDisconnect
from starlette.websockets import WebSocketDisconnect

from speechkit.serve.access import AccessControl
from speechkit.serve.audio_input import decode_upload
from speechkit.serve.batching import Batcher
from speechkit.serve.errors import RequestError
from speechkit.serve.limits import ServeLimits
from speechkit.serve.models import ServedModel
from speechkit.serve.request_log import RequestLog
from speechkit.serve.streaming import StreamSession, recognizer_factory

logger = logging.getLogger("speechkit.serve")
STATIC = pathlib.Path(__file__).parent / "static"
UPLOAD_BODY = {"requestBody": {"required": True, "description": "The audio file: the raw bytes (any format "
                               "soundfile reads), or multipart/form-data with one file part.",
                               "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                   "format": "binary"}},
                                           "multipart/form-data": {"schema": {"type": "object",
                                                                              "properties": {"file": {
                                                                                  "type": "string",
                                                                                  "format": "binary"}}}}}}}
TWO_UPLOADS_BODY = {"requestBody": {"required": True, "description": "The two audio files (any format "
                                    "soundfile reads): the two file parts of a multipart/form-data body, in "
                                    "order.",
                                    "content": {"multipart/form-data": {"schema": {
                                        "type": "object", "required": ["first", "second"],
                                        "properties": {"first": {"type": "string", "format": "binary"},
                                                       "second": {"type": "string", "format": "binary"}}}}}}}


class ModelFailure(Exception):
    """A model raised while answering a request (a 500, logged with the request id)."""


class StreamClosed(Exception):
    """A stream the server ends for a limit of time: the WebSocket close code and its reason."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason


def create_app(models: dict, limits: ServeLimits, token: Optional[str] = None, allowed_origins=(),
               allowed_hosts=(), stream_recognizer: str = "auto"):
    """The ASGI app serving ``models`` (name -> :class:`ServedModel`), wrapped in the access checks
    (:class:`AccessControl`) and the request log (:class:`RequestLog`); ``stream_recognizer`` is
    ``--stream-recognizer`` (:data:`speechkit.serve.streaming.STREAM_RECOGNIZERS`)."""
    batchers = {name: Batcher(model.batch_function(), model.seconds, limits, name)
                for name, model in models.items()}
    streams = {"open": 0}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        for batcher in batchers.values():
            batcher.start()
        yield
        for batcher in batchers.values():  # uvicorn has let the requests in flight finish by now
            await batcher.stop()

    app = FastAPI(title="speechkit serve", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Speech models behind an HTTP and WebSocket API (docs/serve.md).")

    @app.exception_handler(RequestError)
    async def refuse(request: Request, error: RequestError):
        return JSONResponse({"error": error.message, "request_id": _request_id(request)}, error.status)

    @app.exception_handler(ModelFailure)
    async def fail(request: Request, error: ModelFailure):
        request_id = _request_id(request)
        logger.error("request %s: %s", request_id, error, exc_info=error.__cause__)
        return JSONResponse({"error": f"{error}; the server log has the details under request id "
                                      f"{request_id}", "request_id": request_id}, 500)

    def served(name: str, kind: str) -> ServedModel:
        if name not in models:
            raise RequestError(404, f"no model named {name!r}; this server has {', '.join(models)}")
        models[name].require(kind)
        return models[name]

    async def run(model: ServedModel, item):
        try:
            return await batchers[model.name].submit(item)
        except RequestError:
            raise
        except Exception as error:
            raise ModelFailure(f"model {model.name!r} raised {type(error).__name__}") from error

    @app.get("/health")
    async def health():
        """Liveness, the models served, and the open streams and waiting requests (to watch load)."""
        return {"status": "ok", "models": list(models), "open_streams": streams["open"],
                "queued": {name: b.queued() for name, b in batchers.items()},
                "running": {name: b.running for name, b in batchers.items()}}

    @app.get("/v1/models")
    async def list_models():
        """Every model served: name, kind, interface, sample rate and endpoints."""
        return {"models": [model.describe() for model in models.values()]}

    @app.post("/v1/models/{name}/transcribe", openapi_extra=UPLOAD_BODY)
    async def transcribe(name: str, request: Request):
        """Transcribe one audio file: ``{"text", "tokens", "timings"}``."""
        model = served(name, "asr")
        data, filename = await read_upload(request, limits)
        wav = await asyncio.to_thread(decode_upload, data, model.sample_rate, limits, filename)
        result = await run(model, wav)
        return {"model": name, **result.output, "timings": _timings(result, model.seconds(wav)),
                "request_id": _request_id(request)}

    @app.post("/v1/models/{name}/separate", openapi_extra=UPLOAD_BODY)
    async def separate(name: str, request: Request, format: str = "zip"):
        """Split one recording into its sources: a zip of ``s1.wav``, ``s2.wav``, ... (``format=zip``) or
        multipart/form-data with one WAV part per source (``format=multipart``)."""
        if format not in ("zip", "multipart"):
            raise RequestError(400, f"format must be 'zip' or 'multipart', got {format!r}")
        model = served(name, "separation")
        data, filename = await read_upload(request, limits)
        wav = await asyncio.to_thread(decode_upload, data, model.sample_rate, limits, filename)
        result = await run(model, wav)
        files = {f"s{k + 1}.wav": _wav_bytes(source, model.sample_rate)
                 for k, source in enumerate(_below_full_scale(result.output))}
        headers = {"x-batch-items": str(result.batch_items)}
        if format == "zip":
            return Response(_zip(files), media_type="application/zip", headers=headers)
        body, boundary = _multipart(files)
        return Response(body, media_type=f"multipart/form-data; boundary={boundary}", headers=headers)

    @app.post("/v1/models/{name}/generate", openapi_extra=UPLOAD_BODY)
    async def generate(name: str, request: Request):
        """A vocoder's audio (WAV) from a mel spectrogram: a ``.npy`` array (frames, n_mels) as
        ``speechkit embed`` writes, or an audio file (resynthesized through the model's own mel)."""
        model = served(name, "vocoder")
        data, filename = await read_upload(request, limits)
        mel = await asyncio.to_thread(_mel_input, model, data, filename, limits)
        result = await run(model, mel)
        return Response(_wav_bytes(result.output, model.sample_rate), media_type="audio/wav",
                        headers={"x-batch-items": str(result.batch_items)})

    @app.post("/v1/models/{name}/embed", openapi_extra=UPLOAD_BODY)
    async def embed(name: str, request: Request):
        """A speaker model's embedding of one audio file: ``{"embedding": [...], "dim", "timings"}``."""
        model = served(name, "speaker")
        data, filename = await read_upload(request, limits)
        wav = await asyncio.to_thread(decode_upload, data, model.sample_rate, limits, filename)
        result = await run(model, wav)
        embedding = _finite_embedding(model, result.output)
        return {"model": name, "embedding": embedding, "dim": len(embedding),
                "timings": _timings(result, model.seconds(wav)), "request_id": _request_id(request)}

    @app.post("/v1/models/{name}/verify", openapi_extra=TWO_UPLOADS_BODY)
    async def verify(name: str, request: Request):
        """Whether two audio files hold the same speaker: ``{"score", "same", "threshold", "timings"}``,
        ``score`` the cosine similarity of their embeddings and ``same`` whether it reaches the model's
        ``threshold``."""
        model = served(name, "speaker")
        uploads = await read_uploads(request, limits, count=2)
        names = [f"{which} file {filename}" for which, (_, filename) in zip(("first", "second"), uploads)]

        def decode_both() -> list:
            return [decode_upload(data, model.sample_rate, limits, label)
                    for (data, _), label in zip(uploads, names)]

        wavs = await asyncio.to_thread(decode_both)
        # Both queued at once: they usually share one batch (and batch with other requests' files).
        results = await asyncio.gather(*(run(model, wav) for wav in wavs), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        first, second = (torch.tensor(_finite_embedding(model, r.output)) for r in results)
        score = float(model.interface.score(first, second))
        threshold = model.interface.threshold
        return {"model": name, "score": score, "same": score >= threshold, "threshold": threshold,
                "timings": {which: _timings(r, model.seconds(w))
                            for which, r, w in zip(("first", "second"), results, wavs)},
                "request_id": _request_id(request)}

    @app.websocket("/v1/models/{name}/stream")
    async def stream(websocket: WebSocket, name: str):
        """Streaming recognition (protocol: :mod:`speechkit.serve.streaming`)."""
        request_id = websocket.scope["state"]["request_id"]
        try:
            model = served(name, "asr")
        except RequestError as error:
            return await _deny(websocket, error)
        if streams["open"] >= limits.max_streams:
            return await _deny(websocket, RequestError(503, f"the server has {limits.max_streams} streams "
                                                            "open (--max-streams); try again shortly"))

        async def transcribe_now(wav: torch.Tensor) -> dict:
            return (await run(model, wav)).output

        make_recognizer = recognizer_factory(model.interface, transcribe_now, limits, stream_recognizer)
        session = StreamSession(make_recognizer, model.sample_rate, limits,
                                token=token if websocket.scope["state"].get("token_pending") else None)
        await websocket.accept()
        streams["open"] += 1
        loop = asyncio.get_running_loop()
        closes_at = loop.time() + limits.stream_max_s
        try:
            while not session.finished:
                left = closes_at - loop.time()
                try:
                    message = await asyncio.wait_for(websocket.receive(), min(limits.stream_idle_s, left))
                except asyncio.TimeoutError:
                    if left <= limits.stream_idle_s:
                        raise StreamClosed(1008, f"the stream was open {limits.stream_max_s:g} s "
                                                 "(--stream-max-s)") from None
                    raise StreamClosed(1008, f"nothing received for {limits.stream_idle_s:g} s "
                                             "(--stream-idle-s)") from None
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("bytes") is not None:
                    replies = await session.handle_audio(message["bytes"])
                else:
                    replies = await session.handle_text(message.get("text") or "")
                for reply in replies:
                    await websocket.send_json(reply)
            await websocket.close(1000)
        except RequestError as error:
            code = {401: 1008, 413: 1009}.get(error.status, 1007)
            await _close_with(websocket, {"type": "error", "message": error.message,
                                          "request_id": request_id}, code, error.message)
        except StreamClosed as closed:
            await _close_with(websocket, {"type": "error", "message": closed.reason,
                                          "request_id": request_id}, closed.code, closed.reason)
        except WebSocketDisconnect:
            pass  # the client went away: its audio and recognizer go with this frame
        except ModelFailure as error:
            logger.error("request %s: %s", request_id, error, exc_info=error.__cause__)
            await _close_with(websocket, {"type": "error", "request_id": request_id, "message":
                                          f"{error}; the server log has the details under request id "
                                          f"{request_id}"}, 1011, f"model failure (request id {request_id})")
        finally:
            streams["open"] -= 1

    page_html = _page()

    @app.get("/", include_in_schema=False)
    async def page():
        return HTMLResponse(page_html)

    api_html = (STATIC / "api.html").read_text()

    @app.get("/docs", include_in_schema=False)
    async def api_page():
        """The API's reference, rendered from /openapi.json by a page that loads nothing from elsewhere."""
        return HTMLResponse(api_html)

    @app.get("/docs/swagger", include_in_schema=False)
    async def swagger(request: Request):
        """FastAPI's interactive viewer (its scripts come from a CDN: online only)."""
        query = f"?{request.url.query}" if request.url.query else ""
        return get_swagger_ui_html(openapi_url=f"../openapi.json{query}", title="speechkit serve")

    return RequestLog(AccessControl(app, token=token, allowed_origins=allowed_origins,
                                    allowed_hosts=allowed_hosts))


async def read_upload(request: Request, limits: ServeLimits) -> tuple:
    """The uploaded file's bytes and name: the raw body, or the first file part of a multipart body.
    Refuses (413) a body over ``max_request_bytes``: before reading it when its length is declared, else as
    soon as it passes the limit."""
    return (await read_uploads(request, limits, count=1))[0]


async def read_uploads(request: Request, limits: ServeLimits, count: int) -> list:
    """``count`` uploaded files as ``(bytes, name)`` pairs, in the order sent: one may come as the raw body
    or as a multipart body's file part, several only as the file parts of a multipart body (exactly
    ``count`` of them, 400 otherwise). ``max_request_bytes`` bounds the whole body, as for one file."""
    declared = request.headers.get("content-length")
    limit = limits.max_request_bytes
    too_big = RequestError(413, f"the request is larger than the limit of {limit / 1e6:.1f} MB "
                                "(--max-request-mb)")
    stream = request.stream()
    if declared is not None and declared.isdigit() and int(declared) > limit:
        await _discard(request, stream, limit)
        raise too_big
    chunks, size = [], 0
    try:
        async for chunk in stream:
            size += len(chunk)
            if size > limit:
                await _discard(request, stream, limit)
                raise too_big
            chunks.append(chunk)
    except ClientDisconnect:  # gone mid-upload: nobody to answer, nothing kept
        raise RequestError(400, "the client disconnected before the upload was complete") from None
    body = b"".join(chunks)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        if count == 1:
            return [(body, "upload")]
        raise RequestError(400, f"this endpoint takes {count} audio files: send a multipart/form-data body "
                                f"with {count} file parts (curl -F first=@a.wav -F second=@b.wav)")

    async def replay():
        yield body

    try:
        form = await MultiPartParser(request.headers, replay(), max_files=count, max_fields=8).parse()
    except Exception as error:  # noqa: BLE001 (python-multipart's and Starlette's parse errors)
        raise RequestError(400, f"malformed multipart body: {error}") from None
    files = [value for _, value in form.multi_items() if isinstance(value, UploadFile)]
    if not files:
        raise RequestError(400, "the multipart body has no file part; send the audio as a file field")
    if count > 1 and len(files) != count:
        raise RequestError(400, f"the multipart body has {len(files)} file part(s); this endpoint takes "
                                f"exactly {count}")
    return [(await file.read(), file.filename or "upload") for file in files]


async def _discard(request: Request, stream, limit: int) -> None:
    """Read and drop what a client still sends of a body that is refused for its size (up to 4 times the
    limit), so that a client which sends its whole body before reading the answer gets the 413 rather than a
    broken connection. A client that asked ``Expect: 100-continue`` is answered at once: it waits for us."""
    if request.headers.get("expect", "").lower() == "100-continue":
        return
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > 4 * limit:
        return
    dropped = 0
    try:
        async for chunk in stream:
            dropped += len(chunk)
            if dropped > 4 * limit:
                return
    except ClientDisconnect:
        return


def _page() -> str:
    """The web page, its script inlined: one request, so a page opened with ``?token=`` needs no other."""
    script = (STATIC / "app.js").read_text()
    return (STATIC / "index.html").read_text().replace('<script src="static/app.js"></script>',
                                                        f"<script>\n{script}</script>")


def _mel_input(model: ServedModel, data: bytes, name: str, limits: ServeLimits) -> torch.Tensor:
    """A vocoder request's mel: an .npy (frames, n_mels), or the model's mel of an audio file."""
    vocoder = model.interface
    if not data.startswith(b"\x93NUMPY"):
        wav = decode_upload(data, model.sample_rate, limits, name, getattr(model, "audio_channels", "mix"))
        mels, frames = vocoder.mel_batch(wav.unsqueeze(0), torch.tensor([wav.shape[0]]))
        return mels[0, : int(frames[0])].cpu()
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as error:  # noqa: BLE001
        raise RequestError(400, f"{name} is not a readable .npy array ({error})") from None
    if array.ndim != 2 or array.shape[1] != vocoder.n_mels or array.shape[0] == 0:
        raise RequestError(400, f"{name} has shape {array.shape}; expected (frames, {vocoder.n_mels}) with "
                                "at least one frame")
    if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
        raise RequestError(400, f"{name} must hold finite floats, got dtype {array.dtype}")
    mel = torch.from_numpy(array.astype(np.float32))
    if model.seconds(mel) > limits.max_audio_seconds:
        raise RequestError(413, f"{name} would make {model.seconds(mel):.1f} s of audio; the limit is "
                                f"{limits.max_audio_seconds:g} s (--max-audio-seconds)")
    return mel


def _finite_embedding(model: ServedModel, embedding: torch.Tensor) -> list:
    """A (dim,) embedding as a list of floats; a model that gives NaN or infinities has failed (500)."""
    if not bool(torch.isfinite(embedding).all()):
        raise ModelFailure(f"model {model.name!r} returned a non-finite embedding")
    return embedding.tolist()


def _timings(result, audio_seconds: float) -> dict:
    return {"audio_seconds": round(audio_seconds, 4), "queue_ms": round(result.queue_ms, 2),
            "compute_ms": round(result.compute_ms, 2), "batch_items": result.batch_items}


def _below_full_scale(sources: torch.Tensor) -> torch.Tensor:
    peak = float(sources.abs().max()) if sources.numel() else 0.0
    return sources * (0.99 / peak) if peak > 0.99 else sources  # estimates carry no absolute level


def _wav_bytes(waveform: torch.Tensor, rate: int) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, waveform.clamp(-1, 1).numpy(), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _zip(files: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _multipart(files: dict) -> tuple:
    boundary = "speechkit-" + uuid.uuid4().hex
    parts = []
    for name, data in files.items():
        stem = name.rsplit(".", 1)[0]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{stem}"; filename="{name}"\r\n'
                     f"Content-Type: audio/wav\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), boundary


def _request_id(request) -> str:
    return request.scope.get("state", {}).get("request_id", "")


async def _deny(websocket: WebSocket, error: RequestError) -> None:
    """Refuse a handshake with a real HTTP status when the server can send one, else close (1008)."""
    body = {"error": error.message}
    try:
        await websocket.send_denial_response(JSONResponse(body, error.status))
    except RuntimeError:
        await websocket.accept()
        await _close_with(websocket, {"type": "error", "message": error.message}, 1008, error.message)


async def _close_with(websocket: WebSocket, message: dict, code: int, reason: str = "") -> None:
    """Send the error message, then close with ``code`` and ``reason`` (cut to the 123 bytes a close frame
    holds)."""
    with contextlib.suppress(Exception):  # the client may be gone already
        await websocket.send_json(message)
        await websocket.close(code, reason.encode()[:123].decode(errors="ignore"))
