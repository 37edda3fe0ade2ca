# sourced by the shell tests that drive a server with the python grpc client (load_small,
# load_script_small): their shared prerequisite checks. a missing one skips the test (exit 77),
# or fails it under CI, where scripts/setup provides them.
#   PREREQ_LABEL=load_small; source "${BASH_SOURCE%/*}/util/test_prereqs.sh"
#   require_model_and_grpc_client MODEL SOURCE_DIR

test_skip() {
  echo "${PREREQ_LABEL:-test}: $1: skipped"
  [ -n "${CI:-}" ] && exit 1
  exit 77
}

# the model file, the generated python stubs and debian's python3-grpcio.
require_model_and_grpc_client() {
  local model=$1 src=$2
  [ -f "$model" ] || test_skip "$model missing"
  [ -f "$src/tools/python_client/gen/vqserve_pb2.py" ] || test_skip "python stubs missing (scripts/gen_python_stubs)"
  /usr/bin/python3 -c "import grpc" 2> /dev/null || test_skip "python3-grpcio missing"
}
