# sourced by the run_*_on_device.sh scripts on the lent gpu machine: unpacks $DIR/bundle.tar.xz
# (bench/cuda/bundle_binaries.sh) into B=/tmp/b and puts its lib/ on LD_LIBRARY_PATH; when
# $DIR/model.gguf.xz is there, decompresses it to M=/tmp/model.gguf and exports VQSERVE_MODEL
# and VQSERVE_VQCB ($DIR/vecinfer-k2v2.vqcb) for the tests.
B=/tmp/b
mkdir -p "$B"
python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
  "$DIR/bundle.tar.xz" "$B"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH
if [ -f "$DIR/model.gguf.xz" ]; then
  python3 - "$DIR/model.gguf.xz" <<'PY'
import lzma, shutil, sys
with lzma.open(sys.argv[1]) as f, open("/tmp/model.gguf", "wb") as g:
    shutil.copyfileobj(f, g)
PY
  export VQSERVE_MODEL=/tmp/model.gguf VQSERVE_VQCB=$DIR/vecinfer-k2v2.vqcb
  M=$VQSERVE_MODEL
fi
