# node_bin MAJOR: prints the folder of a Node.js MAJOR.x binary, installed from the npm registry's
# node-<platform>-<arch> package (the binary inside a registry package: no install script, nothing
# from apt). The `node` package itself installs that same package from a preinstall script, which
# npm 11 does not run unless allowed. Kept in .ci/.node/MAJOR (ignored by git) between runs.
node_bin() {
  local major=$1 dir pkg
  dir="$(pwd)/.ci/.node/$major"
  pkg="node-$(node -p 'process.platform')-$(node -p 'process.arch')"
  if [ ! -x "$dir/node_modules/$pkg/bin/node" ]; then
    npm install --no-save --no-audit --no-fund --no-package-lock --silent --prefix "$dir" "$pkg@$major" >&2
  fi
  echo "$dir/node_modules/$pkg/bin"
}
