"""The wheel built from the repository installs one top-level import name: ``streamcrawl``.

The folders stay at the repository's top level (``agents/``, ``topology/``, ``schemas/``) and are
installed as ``streamcrawl.agents``, ``streamcrawl.topology`` and ``streamcrawl.schemas``, so
installing streamcrawl next to another distribution that owns ``agents`` breaks neither.
``topology/api/`` is the ``streamcrawl`` package itself (``streamcrawl.crawl``, docs/api.md), in
the wheel and in an editable install alike, and never ``streamcrawl.topology.api``.

The wheel without extras (``pip install streamcrawl``) crawls, and its Kafka commands name the
extra to install: installed offline into a fresh venv from wheels of this environment's own
distributions.
"""

from __future__ import annotations

import email.parser
import json
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from streamcrawl.agents.render import browser
from streamcrawl.topology.cli.kafka_args import KAFKA_EXTRA
from streamcrawl.topology.settings import Settings
from tests.httpserver import RecordingServer, html

ROOT = Path(__file__).resolve().parent.parent

PIP = (sys.executable, "-m", "pip")


def build_wheel(out: Path) -> Path:
    subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        cwd=out,
    )
    (wheel,) = out.glob("streamcrawl-*.whl")
    return wheel


def test_wheel_installs_only_the_streamcrawl_namespace(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top_level == {"streamcrawl"}
    for packaged in (
        "streamcrawl/__init__.py",
        "streamcrawl/py.typed",
        "streamcrawl/agents/frontier/frontier.py",
        "streamcrawl/topology/cli/main.py",
        "streamcrawl/schemas/cassandra.cql",
        "streamcrawl/schemas/json/pages.v1.schema.json",
        "streamcrawl/agents/py.typed",
    ):
        assert packaged in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert (
        "streamcrawl = streamcrawl.topology.cli.main:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )
    assert [name for name in names if name.startswith("streamcrawl/topology/api/")] == []

    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    # ``import streamcrawl`` loads the records: msgspec, and nothing else of the dependencies.
    msgspec = repack(metadata.distribution("msgspec"), tmp_path)
    subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", str(wheel), str(msgspec)],
        check=True,
    )
    # Run from an empty folder: the repository's own folders must not be on sys.path.
    run = tmp_path / "cwd"
    run.mkdir()
    bare = subprocess.run(
        [str(python), "-c", "import agents"], cwd=run, capture_output=True, text=True
    )
    assert bare.returncode != 0
    assert "No module named 'agents'" in bare.stderr
    namespaced = subprocess.run(
        [str(python), "-c", IMPORTS],
        cwd=run,
        capture_output=True,
        text=True,
    )
    assert namespaced.returncode == 0, namespaced.stderr
    site = namespaced.stdout.split()[0].removesuffix("/streamcrawl/__init__.py")
    assert namespaced.stdout.split() == [
        f"{site}/streamcrawl/__init__.py",
        f"{site}/streamcrawl/agents/__init__.py",
        f"{site}/streamcrawl/topology/__init__.py",
        "crawl",
        "False",
    ]


# Where the packages are imported from; the API's function; whether the api folder is also
# importable under its path's name.
IMPORTS = """
import importlib.util
import streamcrawl, streamcrawl.agents, streamcrawl.schemas, streamcrawl.topology
print(streamcrawl.__file__, streamcrawl.agents.__file__, streamcrawl.topology.__file__)
print(streamcrawl.crawl.__name__)
print(importlib.util.find_spec("streamcrawl.topology.api") is not None)
"""


@pytest.mark.slow
def test_an_editable_install_maps_the_same_packages(tmp_path: Path) -> None:
    """``pip install -e .`` (the development set-up, docs/development.md) maps ``streamcrawl``
    to ``topology/api/`` and each subpackage to its folder, as the wheel installs them."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    # The build backend (setuptools, under --no-build-isolation) and the dependencies: this
    # environment's, as a path; its own editable finder is not loaded from there.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "outer.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", "--no-build-isolation",
         "-e", str(ROOT)],
        check=True, cwd=tmp_path,
    )  # fmt: skip
    run = tmp_path / "cwd"
    run.mkdir()
    found = subprocess.run(
        [str(python), "-c", IMPORTS], cwd=run, capture_output=True, text=True, check=False
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [
        str(ROOT / "topology/api/__init__.py"),
        str(ROOT / "agents/__init__.py"),
        str(ROOT / "topology/__init__.py"),
        "crawl",
        "True",  # the folder is on disk under topology/: nothing imports it by that name
    ]


# --- the base install ---------------------------------------------------------------------------


def requires_dist(wheel: Path) -> list[Requirement]:
    """The requirements of ``wheel`` without extras (its ``Requires-Dist`` lines whose marker
    holds when no extra is asked for)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))
    reqs = [Requirement(line) for line in metadata.get_all("Requires-Dist") or ()]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def installed_closure(requirements: Iterable[Requirement]) -> list[metadata.Distribution]:
    """The distributions of this environment that ``requirements`` need, by their installed
    metadata, the extras asked for followed. Fails if one is not installed."""
    installed = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}
    seen: set[tuple[str, str]] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        assert name in installed, f"{req} is not installed here: pip install -e '.[test]'"
        for extra in ("", *req.extras):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for line in installed[name].requires or ():
                dep = Requirement(line)
                if dep.marker is None or dep.marker.evaluate({"extra": extra}):
                    todo.append(dep)
    return [installed[name] for name in sorted({name for name, _ in seen})]


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """A wheel of an installed distribution, made from the files its RECORD lists inside
    site-packages (console scripts and bytecode left out): what pip needs to install it again."""
    name = dist.metadata["Name"].replace("-", "_")
    wheel = out / f"{name}-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for file in dist.files or ():
            if not str(file).startswith("..") and "__pycache__" not in file.parts:
                zf.write(dist.locate_file(file), str(file))
    return wheel


# streamcrawl.crawl on the base install: the titles of the pages of the site at argv[1].
API_CRAWL = """
import asyncio, sys
import streamcrawl

async def main() -> None:
    async for page in streamcrawl.crawl(sys.argv[1], delay=0, crawl_id="api", out="api-out"):
        print(page.title)

asyncio.run(main())
"""


@pytest.mark.slow
def test_the_base_install_crawls_and_names_the_kafka_extra(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    house = tmp_path / "wheelhouse"
    house.mkdir()
    for dist in installed_closure(requires_dist(wheel)):
        repack(dist, house)
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    offline = ("--no-index", "--find-links", str(house))
    subprocess.run([*PIP, "--python", str(python), "install", "-q", *offline, wheel], check=True)
    present = subprocess.run(
        [str(python), "-c", "import importlib.util as u, sys; "
         "print(*[n for n in sys.argv[1:] if u.find_spec(n)])", *KAFKA_EXTRA, "mode", "pydantic"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert present.stdout.split() == []

    run = tmp_path / "cwd"
    run.mkdir()

    def streamcrawl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env / "bin" / "streamcrawl"), *args],
            cwd=run, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    assert "worker" in streamcrawl("--help").stdout
    site = {"/": html('<title>home</title><a href="/a">a</a>'), "/a": html("<title>a</title>")}
    with RecordingServer(site) as srv:
        crawl = streamcrawl("crawl", srv.url("/"), "--delay", "0", "--json", "--warc", "warcs")
        api = subprocess.run(
            [str(python), "-c", API_CRAWL, srv.url("/")],
            cwd=run, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    assert api.returncode == 0, api.stderr
    assert sorted(api.stdout.splitlines()) == ["a", "home"]
    assert json.loads(crawl.stdout)["states"] == {"fetched": 2}
    assert len((run / "out" / "pages.jsonl").read_text().splitlines()) == 2
    index = streamcrawl("warc", "index", "warcs")
    assert index.returncode == 0, index.stderr
    assert sum('"status": "200"' in line for line in index.stdout.splitlines()) == 2

    pages = subprocess.run(
        [str(python), "-c", "import streamcrawl; streamcrawl.pages()"],
        cwd=run, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert pages.stderr.splitlines()[-1] == (
        "streamcrawl.agents.errors.ConfigError: streamcrawl.pages needs the kafka extra "
        "(faust is not installed): pip install 'streamcrawl[kafka]'"
    )

    worker = streamcrawl("worker")
    assert worker.returncode == 2
    assert worker.stderr == (
        "streamcrawl: error: worker needs the kafka extra (faust is not installed): "
        "pip install 'streamcrawl[kafka]'\n"
    )


# --- crawl plugins in the worker image (docs/plugins.md, "Deploying plugins") -------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (instruction, argument), continuation lines
    joined and comments dropped."""
    stages: list[list[tuple[str, str]]] = []
    joined = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not joined and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        keyword, _, arg = (joined + line).strip().partition(" ")
        joined = ""
        if keyword.upper() == "FROM":
            stages.append([])
        if keyword and stages:
            stages[-1].append((keyword.upper(), arg.strip()))
    return stages


def test_the_worker_images_build_argument_plugins_is_installed_with_streamcrawl() -> None:
    """``--build-arg PLUGINS=...`` reaches the builder stage's one install step, which hands it
    to pip with streamcrawl and then loads every plugin; the example package is in the build
    context for ``PLUGINS=./examples/plugins``."""
    builder = dockerfile_stages()[0]
    arg = builder.index(("ARG", 'PLUGINS=""'))
    install_step = "RENDER=$RENDER sh /usr/local/bin/streamcrawl-install /opt/venv /src $PLUGINS"
    run = builder.index(("RUN", install_step))
    assert arg < run and ("COPY", "examples/plugins ./examples/plugins") in builder[:run]
    assert ("WORKDIR", "/src") in builder[:run]  # ./examples/plugins resolves there
    assert "!examples/plugins" in (ROOT / ".dockerignore").read_text().splitlines()
    install = (ROOT / "docker" / "install.sh").read_text()
    assert "shift 2\n" in install and '"$SRC[$EXTRAS]" "$@"\n' in install
    assert install.rstrip().splitlines()[-2] == '"$VENV/bin/streamcrawl" plugin list'
    check = (ROOT / "scripts" / "check-dockerfile.sh").read_text()
    assert '"$WORK/venv" "$WORK/context/src" ./examples/plugins)' in check  # CI installs them


def test_the_images_build_argument_render_installs_the_render_extra_and_chromium() -> None:
    """``--build-arg RENDER=1`` (docs/rendering.md, "The image"): the builder's install step
    adds the render extra, the runtime stage Debian's chromium at the path the render worker
    reads, and no browser download; RENDER=0, the default, neither."""
    builder, runtime = dockerfile_stages()[0], dockerfile_stages()[-1]
    for stage in (builder, runtime):
        assert ("ARG", "RENDER=0") in stage
    install = (ROOT / "docker" / "install.sh").read_text()
    assert "  1) EXTRAS=kafka,render ;;\n  0) EXTRAS=kafka ;;\n" in install
    (apt,) = [a for kw, a in runtime if kw == "RUN" and "chromium" in a]
    assert apt.startswith('if [ "$RENDER" = 1 ]; then')
    assert "apt-get install --yes --no-install-recommends chromium " in apt
    copy = runtime.index(("COPY", "--from=builder /opt/venv /opt/venv"))
    assert runtime.index(("RUN", apt)) < copy  # the apt layer is cached across code changes
    env = " ".join(a for kw, a in runtime if kw == "ENV").split()
    assert f"STREAMCRAWL_CHROMIUM={browser.DEFAULT_CHROMIUM}" in env
    assert "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1" in env
    assert ("EXPOSE", "6066 6067") in runtime  # the worker's and the render worker's web ports
    assert Settings.model_fields["render_web_port"].default == 6067


@pytest.mark.slow
def test_the_example_plugins_installed_into_a_fresh_venv_are_listed(tmp_path: Path) -> None:
    """``pip install examples/plugins`` next to streamcrawl (offline: the build backend from
    this environment) and ``streamcrawl plugin list`` shows its three plugins, one of each
    kind, loaded by entry point."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "outer.pth").write_text(sysconfig.get_path("purelib") + "\n")
    example = tmp_path / "example"  # a copy: the build leaves its folders next to the sources
    shutil.copytree(ROOT / "examples" / "plugins", example)
    for project in (ROOT, example):
        subprocess.run(
            [*PIP, "--python", str(python), "install", "-q", "--no-deps",
             "--no-build-isolation", str(project)],
            check=True, cwd=tmp_path,
        )  # fmt: skip
    listed = subprocess.run(
        [str(env / "bin" / "streamcrawl"), "plugin", "list"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"name": "json_links", "kind": "link_extractor",
         "about": "follow URLs listed in JSON blobs"},
        {"name": "max_query_params", "kind": "url_filter",
         "about": "refuse URLs with over max parameters"},
        {"name": "price", "kind": "page_extractor", "about": "a page's price, normalized"},
    ]  # fmt: skip
