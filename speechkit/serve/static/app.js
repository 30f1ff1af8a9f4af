// The page of `speechkit serve`: plain JavaScript, no build step. It calls the same HTTP and WebSocket API
// as any client (docs/serve.md): GET /v1/models, POST .../transcribe|separate|generate|verify, WS .../stream.
"use strict";

const $ = (id) => document.getElementById(id);
// A server bound beyond 127.0.0.1 needs a token: the page takes it from its own URL (?token=...).
const token = new URLSearchParams(location.search).get("token");
const authHeaders = token ? { Authorization: "Bearer " + token } : {};
const DRAW_RATE = 16000; // uploads are decoded at this rate for drawing
let models = [];
// Collects the microphone's samples on the audio thread and posts them in chunks of 4096.
const TAP_WORKLET = `
class Tap extends AudioWorkletProcessor {
  constructor() {
    super();
    this.buffer = new Float32Array(4096);
    this.filled = 0;
    this.port.onmessage = () => { // "flush": the recording stops, send what is left
      this.port.postMessage(this.buffer.slice(0, this.filled));
      this.filled = 0;
      this.port.postMessage("flushed");
    };
  }
  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      for (let i = 0; i < channel.length; i++) {
        this.buffer[this.filled++] = channel[i];
        if (this.filled === this.buffer.length) {
          this.port.postMessage(this.buffer);
          this.buffer = new Float32Array(4096);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor("tap", Tap);
`;
let recording = null; // {context, stream, node, socket, chunks}

function status(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function current() {
  return models.find((m) => m.name === $("model").value);
}

function setTranscript(text, state) {
  $("transcript").textContent = text;
  $("transcript").dataset.state = state;
}

async function loadModels() {
  const answer = await fetch("v1/models", { headers: authHeaders });
  if (!answer.ok) {
    status("cannot list the models: " + (await errorText(answer)), true);
    return;
  }
  models = (await answer.json()).models;
  $("model").innerHTML = "";
  for (const m of models) {
    const option = document.createElement("option");
    option.value = m.name;
    option.textContent = `${m.name} (${m.kind})`;
    $("model").appendChild(option);
  }
  modelChanged();
}

function modelChanged() {
  const m = current();
  if (!m) return;
  $("model-info").textContent = `${m.interface}, ${m.sample_rate} Hz`;
  $("send").disabled = false;
  $("record").disabled = m.kind !== "asr";
  $("transcript-box").classList.toggle("hidden", m.kind !== "asr");
  $("sources-box").classList.add("hidden");
  // A speaker model compares two recordings: a second file input, and the verdict box.
  $("second-file").classList.toggle("hidden", m.kind !== "speaker");
  $("verify-box").classList.toggle("hidden", m.kind !== "speaker");
  $("send").textContent = m.kind === "speaker" ? "Compare" : "Send file";
}

async function errorText(answer) {
  try {
    const body = await answer.json();
    return `${answer.status}: ${body.error || JSON.stringify(body)}`;
  } catch (e) {
    return `${answer.status} ${answer.statusText}`;
  }
}

// ------------------------------------------------------------------------------------------ drawing
function drawWaveform(canvas, samples) {
  const g = canvas.getContext("2d");
  const { width, height } = canvas;
  g.clearRect(0, 0, width, height);
  g.strokeStyle = "#0969da";
  g.beginPath();
  const step = Math.max(1, Math.floor(samples.length / width));
  for (let x = 0; x < width; x++) {
    let lo = 0, hi = 0;
    const start = Math.floor((x * samples.length) / width);
    for (let i = start; i < Math.min(samples.length, start + step); i++) {
      lo = Math.min(lo, samples[i]);
      hi = Math.max(hi, samples[i]);
    }
    g.moveTo(x + 0.5, height / 2 - hi * (height / 2));
    g.lineTo(x + 0.5, height / 2 - lo * (height / 2) + 1);
  }
  g.stroke();
}

function fft(re, im) {
  // In-place radix-2 FFT; re.length is a power of two.
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j], re[i]];
      [im[i], im[j]] = [im[j], im[i]];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const angle = (-2 * Math.PI) / len;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < len / 2; k++) {
        const wr = Math.cos(angle * k), wi = Math.sin(angle * k);
        const ur = re[i + k], ui = im[i + k];
        const vr = re[i + k + len / 2] * wr - im[i + k + len / 2] * wi;
        const vi = re[i + k + len / 2] * wi + im[i + k + len / 2] * wr;
        re[i + k] = ur + vr; im[i + k] = ui + vi;
        re[i + k + len / 2] = ur - vr; im[i + k + len / 2] = ui - vi;
      }
    }
  }
}

const AXIS_LEFT = 44, AXIS_BOTTOM = 18; // room for the spectrogram's frequency and time labels

function drawSpectrogram(canvas, samples, rate) {
  // Log-magnitude STFT (512-point Hann window), one column per pixel, 0 to 8 kHz (or the Nyquist frequency)
  // bottom to top, with a frequency axis (kHz) on the left and a time axis (s) below.
  const g = canvas.getContext("2d");
  const width = canvas.width - AXIS_LEFT, height = canvas.height - AXIS_BOTTOM;
  const size = 512, top = Math.min(8000, rate / 2), bins = Math.max(1, Math.floor((top / rate) * size));
  g.clearRect(0, 0, canvas.width, canvas.height);
  const image = g.createImageData(width, height);
  const window = Float32Array.from({ length: size }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / size));
  const columns = [];
  let peak = -Infinity;
  for (let x = 0; x < width; x++) {
    const start = Math.floor((x * Math.max(0, samples.length - size)) / width);
    const re = new Float32Array(size), im = new Float32Array(size);
    for (let i = 0; i < size && start + i < samples.length; i++) re[i] = samples[start + i] * window[i];
    fft(re, im);
    const column = new Float32Array(bins);
    for (let b = 0; b < bins; b++) {
      column[b] = Math.log10(re[b] * re[b] + im[b] * im[b] + 1e-10);
      peak = Math.max(peak, column[b]);
    }
    columns.push(column);
  }
  for (let x = 0; x < width; x++) {
    for (let y = 0; y < height; y++) {
      const b = Math.floor(((height - 1 - y) * bins) / height);
      const level = Math.max(0, Math.min(1, (columns[x][b] - (peak - 8)) / 8)); // 80 dB range
      const at = (y * width + x) * 4;
      image.data[at] = 255 * Math.min(1, level * 1.8);
      image.data[at + 1] = 255 * Math.max(0, level * 1.8 - 0.8);
      image.data[at + 2] = 90 * (1 - level) + 40 * level;
      image.data[at + 3] = 255;
    }
  }
  g.putImageData(image, AXIS_LEFT, 0);
  drawAxes(g, width, height, top, samples.length / rate);
}

function drawAxes(g, width, height, topHz, seconds) {
  // Ticks and labels: every kHz up to the top frequency, and about eight steps of 1-2-5 x 10^n seconds.
  g.fillStyle = "#57606a";
  g.strokeStyle = "#57606a";
  g.font = "11px system-ui, sans-serif";
  g.textAlign = "right";
  g.textBaseline = "middle";
  const kHzStep = topHz > 4000 ? 2000 : 1000;
  for (let f = 0; f <= topHz; f += kHzStep) {
    const y = height - 1 - (f / topHz) * (height - 1);
    g.fillRect(AXIS_LEFT - 4, Math.round(y), 4, 1);
    g.fillText(`${f / 1000} kHz`, AXIS_LEFT - 6, Math.min(height - 6, Math.max(6, y)));
  }
  g.textAlign = "center";
  g.textBaseline = "top";
  const raw = seconds / 8, power = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) || power;
  for (let t = 0; t <= seconds + 1e-9; t += step) {
    const x = AXIS_LEFT + (seconds > 0 ? (t / seconds) * (width - 1) : 0);
    g.fillRect(Math.round(x), height, 1, 4);
    g.fillText(`${Number(t.toFixed(3))} s`, Math.min(AXIS_LEFT + width - 14, Math.max(AXIS_LEFT + 10, x)), height + 5);
  }
}

function clearOutputs() {
  // A new input: nothing of the previous one stays on screen (an error would otherwise show it as this one's).
  for (const id of ["waveform", "spectrogram"]) $(id).getContext("2d").clearRect(0, 0, $(id).width, $(id).height);
  setTranscript("", "empty");
  $("sources").innerHTML = "";
  $("sources-box").classList.add("hidden");
  $("verdict").textContent = "";
  $("verdict").dataset.same = "";
  $("verify-score").textContent = "";
  $("pair").innerHTML = "";
}

function drawInput(samples, rate) {
  drawWaveform($("waveform"), samples);
  drawSpectrogram($("spectrogram"), samples, rate);
}

async function decodeForDrawing(blob) {
  try {
    const context = new OfflineAudioContext(1, 1, DRAW_RATE);
    const decoded = await context.decodeAudioData(await blob.arrayBuffer());
    return decoded.getChannelData(0);
  } catch (e) {
    return null; // not audio the browser decodes (a .npy mel): nothing to draw
  }
}

// --------------------------------------------------------------------------------------------- upload
async function sendFile() {
  const m = current();
  const file = $("file").files[0];
  if (!file) {
    status("choose a file first", true);
    return;
  }
  if (m.kind === "speaker") return compareSpeakers(m, file, $("file2").files[0]);
  clearOutputs();
  const samples = await decodeForDrawing(file);
  if (samples) drawInput(samples, DRAW_RATE);
  const endpoint = { asr: "transcribe", separation: "separate?format=multipart", vocoder: "generate" }[m.kind];
  status(`sending ${file.name} to ${m.name}...`);
  const answer = await fetch(`v1/models/${m.name}/${endpoint}`, { method: "POST", body: file, headers: authHeaders });
  if (!answer.ok) {
    status(await errorText(answer), true);
    return;
  }
  if (m.kind === "asr") {
    const result = await answer.json();
    setTranscript(result.text, "final");
    status(`transcribed ${result.timings.audio_seconds.toFixed(2)} s in ${result.timings.compute_ms.toFixed(0)} ms ` +
      `(batch of ${result.timings.batch_items}; request ${result.request_id})`);
  } else if (m.kind === "separation") {
    const form = await answer.formData();
    await showSources([...form.entries()].map(([name, value]) => [name, value]));
    status(`separated into ${[...form.keys()].length} sources`);
  } else {
    await showSources([["generated", await answer.blob()]]);
    status("generated");
  }
}

async function compareSpeakers(m, first, second) {
  // Two recordings to /verify as the two file parts of one form; the verdict, the score against the model's
  // threshold, and both recordings side by side.
  if (!second) {
    status("choose a second file to compare with the first", true);
    return;
  }
  clearOutputs();
  const samples = await decodeForDrawing(first);
  if (samples) drawInput(samples, DRAW_RATE);
  const form = new FormData();
  form.append("first", first, first.name);
  form.append("second", second, second.name);
  status(`comparing ${first.name} and ${second.name} with ${m.name}...`);
  const answer = await fetch(`v1/models/${m.name}/verify`, { method: "POST", body: form, headers: authHeaders });
  if (!answer.ok) {
    status(await errorText(answer), true);
    return;
  }
  const result = await answer.json();
  $("verdict").textContent = result.same ? "Same speaker" : "Different speakers";
  $("verdict").dataset.same = String(result.same);
  $("verdict").dataset.score = String(result.score);
  $("verify-score").textContent = `cosine score ${result.score.toFixed(3)}; the model calls ` +
    `${result.threshold.toFixed(3)} or more the same speaker`;
  await showFigures($("pair"), [[first.name, first], [second.name, second]]);
  status(`compared ${first.name} and ${second.name} (request ${result.request_id})`);
}

async function showSources(parts) {
  // Separated sources (or a vocoder's output) side by side.
  $("sources-box").classList.remove("hidden");
  await showFigures($("sources"), parts);
}

async function showFigures(container, parts) {
  // Recordings side by side: a caption, a player and a waveform each.
  container.innerHTML = "";
  for (const [name, blob] of parts) {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    const player = document.createElement("audio");
    player.controls = true;
    player.src = URL.createObjectURL(blob);
    player.dataset.source = name;
    const canvas = document.createElement("canvas");
    canvas.width = 400;
    canvas.height = 80;
    figure.append(caption, player, canvas);
    container.appendChild(figure);
    const samples = await decodeForDrawing(blob);
    if (samples) drawWaveform(canvas, samples);
  }
}

// ------------------------------------------------------------------------------------------ streaming
async function startRecording() {
  const m = current();
  let stream;
  try {
    // No processing: the model hears what the microphone hears.
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
  } catch (e) {
    status("no microphone: " + e.message, true);
    return;
  }
  const context = new AudioContext();
  const source = context.createMediaStreamSource(stream);
  clearOutputs();
  // The samples are taken on the audio thread (an AudioWorklet) and queued to this page as messages, so a
  // busy page (drawing, a slow machine) delays chunks but never drops or repeats one.
  await context.audioWorklet.addModule(URL.createObjectURL(new Blob([TAP_WORKLET], { type: "text/javascript" })));
  const node = new AudioWorkletNode(context, "tap", { numberOfOutputs: 1 });
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const base = location.pathname.replace(/[^/]*$/, "");
  // The token goes in the first message, not the URL: URLs end up in logs and histories.
  const socket = new WebSocket(`${scheme}//${location.host}${base}v1/models/${m.name}/stream`);
  socket.binaryType = "arraybuffer";
  recording = { context, stream, source, node, socket, chunks: [], length: 0, open: false };
  setTranscript("", "partial");
  socket.onopen = () => {
    socket.send(JSON.stringify({ type: "start", sample_rate: context.sampleRate, ...(token ? { token } : {}) }));
    for (const chunk of recording.chunks) socket.send(chunk.buffer); // taken while the socket opened
    recording.open = true;
    status(`recording at ${context.sampleRate} Hz...`);
  };
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "partial") setTranscript(message.text, "partial");
    else if (message.type === "final") {
      setTranscript(message.text, "final");
      status(`final transcript of ${message.seconds.toFixed(2)} s`);
    } else if (message.type === "error") status(message.message, true);
  };
  socket.onclose = (event) => {
    if (event.code !== 1000) status(`stream closed (${event.code}) ${event.reason}`, event.code !== 1000);
    stopAudio();
  };
  node.port.onmessage = (event) => {
    if (event.data === "flushed") {
      if (recording && recording.onflushed) recording.onflushed();
      return;
    }
    if (!recording) return;
    const chunk = event.data;
    recording.chunks.push(chunk);
    recording.length += chunk.length;
    if (recording.open) socket.send(chunk.buffer);
    drawLive(recording, context.sampleRate);
  };
  source.connect(node);
  node.connect(context.destination);
  $("record").disabled = true;
  $("stop").disabled = false;
}

function drawLive(r, rate) {
  // While recording: the waveform of everything so far, at most twice a second (the spectrogram comes at the
  // end, its cost would grow with the recording).
  const now = performance.now();
  if (r.drawnAt && now - r.drawnAt < 500) return;
  r.drawnAt = now;
  drawWaveform($("waveform"), joined(r.chunks, r.length));
}

function joined(chunks, length) {
  const all = new Float32Array(length);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return all;
}

function stopAudio() {
  if (!recording) return;
  const r = recording;
  recording = null;
  r.node.disconnect();
  r.source.disconnect();
  r.stream.getTracks().forEach((t) => t.stop());
  r.context.close();
  drawInput(joined(r.chunks, r.length), r.context.sampleRate);
  $("record").disabled = current().kind !== "asr";
  $("stop").disabled = true;
  return r;
}

async function stopRecording() {
  if (!recording) return;
  const socket = recording.socket;
  $("stop").disabled = true;
  await new Promise((resolve) => { // the samples still in the audio thread first
    recording.onflushed = resolve;
    recording.node.port.postMessage("flush");
  });
  stopAudio();
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ type: "end" }));
    status("waiting for the final transcript...");
  }
}

$("model").addEventListener("change", modelChanged);
$("send").addEventListener("click", () => sendFile().catch((e) => status(String(e), true)));
$("record").addEventListener("click", () => startRecording().catch((e) => status(String(e), true)));
$("stop").addEventListener("click", () => stopRecording().catch((e) => status(String(e), true)));
loadModels().catch((e) => status(String(e), true));
