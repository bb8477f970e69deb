"""plax.profiler: the trace file (Chrome trace events) holds the annotations and each jit
trace, compile and execution, nested as they ran; the device memory profile is a pprof
protocol buffer that counts the live arrays' bytes; errors as JAX's."""
from __future__ import annotations

import gzip
import json
import pathlib
import threading

import pytest

import plax
import plax.numpy as jnp
from plax import profiler


def _read_trace(log_dir: pathlib.Path, name: str = "*.trace.json.gz") -> dict:
    files = list((log_dir / "plugins" / "profile").glob(f"*/{name}"))
    assert len(files) == 1, files
    return json.loads(gzip.decompress(files[0].read_bytes()))


def _spans(document: dict) -> list[dict]:
    return [e for e in document["traceEvents"] if e["ph"] == "X"]


def test_trace_records_annotations_and_jit_work_nested(tmp_path):
    def scale(x):
        return x * 3.0

    jitted = plax.jit(scale)
    x = jnp.arange(4.0)

    @profiler.annotate_function
    def annotated(v):
        return v + 1

    with profiler.trace(tmp_path):
        with profiler.TraceAnnotation("outer", size=4):
            jitted(x).block_until_ready()   # first call: trace, compile, execute
            jitted(x).block_until_ready()   # the fast path: execute
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step):
                annotated(x)
        worker = threading.Thread(target=lambda: jitted(x).block_until_ready(), name="worker")
        worker.start()
        worker.join()
    jitted(x)  # after the trace: not recorded, nothing fails
    spans = _spans(_read_trace(tmp_path))
    by_name: dict[str, list[dict]] = {}
    for e in spans:
        by_name.setdefault(e["name"], []).append(e)
        assert e["dur"] >= 0
    assert len(by_name["jit(scale)"]) == 3 and len(by_name["trace scale"]) == 1
    assert len(by_name["compile jit(scale)"]) == 1
    run = by_name["jit(scale)"][0]
    assert run["cat"] == "execute" and run["args"]["device"] == str(next(iter(x.devices())))
    assert run["args"]["backend"] in plax.plugins.registry().backends
    outer = by_name["outer"][0]
    assert outer["args"] == {"size": 4} and outer["cat"] == "annotation"
    for inner in by_name["jit(scale)"][:2] + by_name["compile jit(scale)"]:
        assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + \
            outer["dur"] + 1e-3
    assert [e["args"]["step_num"] for e in by_name["train 0"] + by_name["train 1"]] == [0, 1]
    assert by_name["train 0"][0]["cat"] == "step"
    assert len(by_name["test_trace_records_annotations_and_jit_work_nested.<locals>.annotated"]) == 2
    threads = {e["tid"] for e in by_name["jit(scale)"]}
    assert len(threads) == 2  # the worker thread's call is on its own row
    names = {e["args"]["name"] for e in _read_trace(tmp_path)["traceEvents"]
             if e.get("name") == "thread_name"}
    assert "worker" in names


def test_start_stop_errors_and_perfetto_files(tmp_path, capsys):
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    with pytest.raises(TypeError, match="ProfileOptions"):
        profiler.start_trace(tmp_path, profiler_options={"host_tracer_level": 2})
    profiler.start_trace(tmp_path, create_perfetto_link=True,
                         profiler_options=profiler.ProfileOptions())
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            profiler.start_trace(tmp_path)
        with profiler.TraceAnnotation("only"):
            pass
    finally:
        profiler.stop_trace()
    assert "perfetto_trace.json.gz" in capsys.readouterr().out
    assert [e["name"] for e in _spans(_read_trace(tmp_path, "perfetto_trace.json.gz"))] == ["only"]
    with profiler.TraceAnnotation("no trace running"):  # a no-op
        pass
    with pytest.raises(TypeError, match="string name"):
        profiler.TraceAnnotation(3)


def _decode(message: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's fields, ``(number, value)``: varints as ints, length-delimited
    fields as bytes (a generic wire-format reader, independent of the encoder)."""
    out, i = [], 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while i < len(message):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            n = varint()
            out.append((number, message[i:i + n]))
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def _varints(payload: bytes) -> list[int]:
    values, value, shift = [], 0, 0
    for byte in payload:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            values.append(value)
            value = shift = 0
    return values


def test_device_memory_profile_counts_live_arrays(tmp_path):
    arrays = [jnp.ones((37, 41), jnp.float32) for _ in range(3)]
    profile = _decode(gzip.decompress(profiler.device_memory_profile()))
    strings = [v.decode() for n, v in profile if n == 6]
    assert strings[0] == ""
    types = [[strings[v] for _, v in _decode(m)] for n, m in profile if n == 1]
    assert types == [["allocations", "count"], ["space", "bytes"]]
    functions = {dict(_decode(m))[1]: strings[dict(_decode(m))[2]] for n, m in profile if n == 5}
    locations = {dict(_decode(m))[1] for n, m in profile if n == 4}
    assert locations == set(functions)
    found = []
    for n, m in profile:
        if n != 2:
            continue
        fields = _decode(m)
        stack = [functions[i] for i in _varints(dict(fields)[1])]
        values = _varints(dict(fields)[2])
        labels = {strings[dict(_decode(v))[1]]: strings[dict(_decode(v))[2]]
                  for k, v in fields if k == 3}
        assert labels["kind"] == "buffer" and stack[-1] == labels["device"]
        if stack[0] == "float32[37,41]":
            found.append(values)
    assert found and sum(v[0] for v in found) >= 3
    assert sum(v[1] for v in found) == sum(v[0] for v in found) * 37 * 41 * 4
    path = tmp_path / "memory.prof"
    profiler.save_device_memory_profile(path)
    assert gzip.decompress(path.read_bytes())[:1] == b"\n"  # starts with sample_type
    del arrays
