{
  description = "stackgate: the dev shell (Python 3.11, nox, the docker client with buildx, uv, skopeo, check-jsonschema)";

  # A release branch; `nix flake lock` (or the first `nix develop`) records the exact revision in flake.lock.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      # the platforms of stack/targets.yaml: x86_64 (cpu, H100/H200, Strix Halo) and aarch64 (GB10)
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forEachSystem = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      devShells = forEachSystem (
        pkgs:
        let
          # the images' Python (stack/targets.yaml), with nox and what noxfile.py reads the stack with
          python = pkgs.python311.withPackages (ps: [
            ps.nox
            ps.pyyaml
            ps.pydantic
          ]);
        in
        {
          default = pkgs.mkShell {
            packages = [
              python
              pkgs.docker-client # the CLI only, wrapped with its buildx plugin; the engine is the host's
              pkgs.uv # nox's venv backend, and `python -m ci lock`
              pkgs.skopeo # inspect and copy images by digest without an engine
              pkgs.check-jsonschema # the generated pipeline against Buildkite's schema
            ];
          };
        }
      );
    };
}
