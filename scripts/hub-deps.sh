#!/usr/bin/env bash
# The class hub's proxy: configurable-http-proxy from the npm registry, pinned in deploy/jupyterhub/package.json
# and package-lock.json, installed into deploy/jupyterhub/node_modules (npm ci). Node.js >= 18 and npm come from
# Debian (apt-get, as root or through sudo) when they are missing.
set -euo pipefail
cd "$(dirname "$0")/../deploy/jupyterhub"

node_ok() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
        [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 18 ]
}
if ! node_ok; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
        echo "hub-deps: Node.js >= 18 and npm are missing: apt-get install nodejs npm (as root)" >&2; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "hub-deps: installing nodejs npm"
    "${SUDO[@]}" apt-get install -y nodejs npm || { "${SUDO[@]}" apt-get update && "${SUDO[@]}" apt-get install -y nodejs npm; }
    node_ok || { echo "hub-deps: Node.js >= 18 is needed for configurable-http-proxy" >&2; exit 1; }
fi
npm ci --no-audit --no-fund --loglevel=error
./node_modules/.bin/configurable-http-proxy --version >/dev/null
echo "hub-deps: configurable-http-proxy $(./node_modules/.bin/configurable-http-proxy --version) in deploy/jupyterhub/node_modules"
