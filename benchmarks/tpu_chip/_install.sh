# Sourced by the chip scripts, from the repository root on the device machine:
# pallas-lsp and its pure-Python dependencies from the carried .whl-tpu wheels
# into /tmp/site (the machine has jax and libtpu, not our dependencies).
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}/tmp/site PATH=$PATH:/tmp/site/bin PYTHONUNBUFFERED=1
