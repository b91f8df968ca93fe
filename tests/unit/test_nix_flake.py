"""flake.nix: parsed by nix-instantiate, and its dev shell evaluated against a stand-in nixpkgs (the real one
cannot be fetched where the tests run). Skipped only where nix-instantiate is absent, unless
STACKGATE_REQUIRE_NIX=1 (.ci/run installs Debian's nix-bin and sets it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.paths import REPO

from ci.stack import loader

FLAKE = REPO / "flake.nix"
# the nixpkgs attributes the flake may use, each checked by name against nixpkgs' own tree
STAND_IN = """\
let
  flake = import {flake};
  pkgsFor = system: {{
    python311.withPackages = f: {{
      python = "3.11";
      modules = f {{ nox = "nox"; pyyaml = "pyyaml"; pydantic = "pydantic"; }};
    }};
    mkShell = args: args;
    docker-client = "docker-client"; uv = "uv"; skopeo = "skopeo"; check-jsonschema = "check-jsonschema";
  }};
  systems = [ "x86_64-linux" "aarch64-linux" ];
  nixpkgs = {{
    lib.genAttrs = names: f: builtins.listToAttrs (map (n: {{ name = n; value = f n; }}) names);
    legacyPackages = builtins.listToAttrs (map (n: {{ name = n; value = pkgsFor n; }}) systems);
  }};
in (flake.outputs {{ self = {{ }}; inherit nixpkgs; }}).devShells
"""


@pytest.fixture(scope="module")
def nix_instantiate() -> str:
    found = shutil.which("nix-instantiate")
    if found is None:
        if os.environ.get("STACKGATE_REQUIRE_NIX") == "1":
            pytest.fail("STACKGATE_REQUIRE_NIX=1 and no nix-instantiate on PATH (apt-get install nix-bin)")
        pytest.skip("no nix-instantiate (apt-get install nix-bin)")
    return found


def test_the_flake_parses(nix_instantiate: str) -> None:
    done = subprocess.run([nix_instantiate, "--parse", str(FLAKE)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_dev_shell_holds_the_pinned_toolchain(nix_instantiate: str, tmp_path: Path) -> None:
    expr = tmp_path / "stand-in.nix"
    expr.write_text(STAND_IN.format(flake=FLAKE))
    done = subprocess.run([nix_instantiate, "--eval", "--strict", "--json", str(expr)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shells = json.loads(done.stdout)
    assert sorted(shells) == ["aarch64-linux", "x86_64-linux"]  # the targets' platforms
    python, *tools = shells["x86_64-linux"]["default"]["packages"]
    assert python == {"python": "3.11", "modules": ["nox", "pyyaml", "pydantic"]}
    assert tools == ["docker-client", "uv", "skopeo", "check-jsonschema"]
    assert python["python"] == next(t.python for t in loader.load().targets.values() if t.detect.fallback)
