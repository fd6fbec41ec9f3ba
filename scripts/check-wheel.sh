#!/usr/bin/env bash
# The installed wheel works with no repository beside it (issue 8): `pip install .`
# (not -e) into a fresh venv, then from an empty directory run `pharos --help`,
# `pharos demo` (GET /v1/models, one chat, /status), and `pharos doctor --url` against
# the demo's fake vLLM. About 40 s, most of it pip. Called by `make wheel` (CI: make test).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3.11}"
work="$(mktemp -d /tmp/pharos-wheel.XXXXXX)"
demo_pid=""
cleanup() {
    if [ -n "$demo_pid" ]; then kill -INT "$demo_pid" 2>/dev/null || true; wait "$demo_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$repo" 2>&1 | grep -v "^WARNING: Location" || true
"$work/venv/bin/pharos" --version >/dev/null
mkdir "$work/away" && cd "$work/away"

"$work/venv/bin/pharos" --help | grep -q "pharos"
port="$("$work/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$work/venv/bin/pharos" demo --listen "127.0.0.1:$port" >demo.out 2>demo.err &
demo_pid=$!
for _ in $(seq 100); do
    grep -q "fake vLLM" demo.out 2>/dev/null && break
    kill -0 "$demo_pid" 2>/dev/null || { cat demo.err; echo "check-wheel: demo exited"; exit 1; }
    sleep 0.1
done
grep -q "fake vLLM" demo.out || { cat demo.err; echo "check-wheel: demo never ready"; exit 1; }
base="http://127.0.0.1:$port"
curl -sf "$base/v1/models" | grep -q '"qwen2.5:0.5b"'
curl -sf "$base/v1/chat/completions" \
    -d '{"model":"qwen2.5:0.5b","messages":[{"role":"user","content":"hi"}]}' | grep -q '"choices"'
curl -sf -o /dev/null "$base/status"
vllm="$(awk '/fake vLLM/ {print $4}' demo.out)"
"$work/venv/bin/pharos" doctor --url "$vllm" | grep -q "vllm (detected)"
echo "check-wheel: ok (--help, demo, /v1/models, chat, /status, doctor from $work/away)"
