"""Lab profile: defaults, validation errors that name file/line/field/fix, init round trip,
and a hypothesis fuzz of the loader (it returns a Profile or raises InputError, nothing else)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab import config
from lab.cli import cli
from lab.errors import InputError


@pytest.mark.parametrize("provider", config.PROVIDERS)
def test_init_text_round_trips_to_defaults(provider: str) -> None:
    text = config.init_text(provider)
    assert config.parse(text, "lab.yaml") == config.Profile(provider=provider, source="lab.yaml")
    assert text.count("#") > 8  # it is a commented profile


def test_init_command_writes_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "lab.yaml"
    r = CliRunner().invoke(cli, ["init", "--provider", "vagrant-libvirt", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert config.load(out).provider == "vagrant-libvirt"
    r = CliRunner().invoke(cli, ["init", "--provider", "wsl2", "-o", str(out)])
    assert r.exit_code != 0 and "exists" in str(r.exception)
    assert config.load(out).provider == "vagrant-libvirt"  # untouched


def test_values_and_normalisation(tmp_path: Path) -> None:
    (tmp_path / "bundle").mkdir()
    f = tmp_path / "lab.yaml"
    f.write_text("provider: vagrant-libvirt\nname: gpu-lab\ncpus: 8\nmemory: 32\ndisk: 100\n"
                 "gpu: ['01:00.0', '0000:01:00.0']\ncomponents: [kserve, cert-manager]\n"
                 "versions: {k3s: v1.33.5+k3s1, kfp: 2.5}\noffline: bundle\n"
                 "vagrant: {libvirt_driver: qemu, network: user, isolated: true}\n")
    p = config.load(f)
    assert p.gpu == ("0000:01:00.0",)  # normalised and de-duplicated
    assert p.components == ("cert-manager", "kserve")  # install order
    assert p.versions == {"k3s": "v1.33.5+k3s1", "kfp": "2.5"}
    assert p.offline == str(tmp_path / "bundle")  # relative to the profile's folder
    assert p.vagrant.isolated and p.vagrant.libvirt_driver == "qemu"
    assert config.parse("provider: host\ngpu: off\n").gpu == "off"  # YAML's bare off


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    ("provider: host\ncpu: 4\n", 2, "cpu", "did you mean 'cpus'"),
    ("provider: wsl\n", 1, "provider", "did you mean 'wsl2'"),
    ("name: x\n", 1, "provider", "missing"),
    ("provider: host\nmemory: 2\n", 2, "memory", "between 4 and 2048"),
    ("provider: host\nmemory: lots\n", 2, "memory", "whole number"),
    ("provider: host\nname: My Lab\n", 2, "name", "lowercase letters"),
    ("provider: vagrant-virtualbox\ngpu: ['0000:01:00.0']\n", 2, "gpu", "vagrant-libvirt"),
    ("provider: host\ngpu: [nvidia0]\n", 2, "gpu[0]", "lspci -D"),
    ("provider: wsl2\ngpu: ['01:00.0']\n", 2, "gpu", "gpu: auto"),
    ("provider: host\ncomponents: [kserve]\n", 2, "components", "add cert-manager"),
    ("provider: host\ncomponents:\n  - katib\n  - kubeflow-ui\n", 4, "components[1]", "one of"),
    ("provider: host\nversions: {k3s: [1]}\n", 2, "versions.k3s", "quote it"),
    ("provider: host\noffline: /no/such/dir\n", 2, "offline", "remove `offline`"),
    ("provider: host\nkubeconfig: x\n", 2, "kubeconfig", "only used by provider existing"),
    ("provider: host\nvagrant: {network: user}\n", 2, "vagrant", "Vagrant providers"),
    ("provider: vagrant-libvirt\nvagrant:\n  network: bridge\n", 3, "vagrant.network", "user"),
    ("provider: vagrant-libvirt\nvagrant:\n  isolated: true\n", 3, "vagrant.isolated",
     "network: user"),
    ("provider: vagrant-libvirt\nbox: 'a b'\n", 2, "box", "ORG/NAME"),
    ("provider: host\n  bad: indent\n", 2, None, "invalid YAML"),
    ("- provider: host\n", 1, None, "mapping of fields"),
])
def test_errors_name_file_line_field_and_fix(text: str, line: int | None, field: str | None,
                                             words: str) -> None:
    with pytest.raises(InputError) as err:
        config.parse(text, "lab.yaml")
    e = err.value
    assert e.file == "lab.yaml"
    assert e.line == line
    assert (e.field or None) == field
    assert words in str(e)
    assert "fix:" in str(e) or (e.hint is None and "invalid YAML" not in words)


def test_resolve_prefers_file_then_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="kflab init"):
        config.resolve(None, None)
    assert config.resolve(None, "host").provider == "host"
    (tmp_path / "lab.yaml").write_text("provider: vagrant-libvirt\ngpu: ['0000:01:00.0']\n")
    assert config.resolve(None, None).gpu_pci == ("0000:01:00.0",)
    with pytest.raises(InputError, match="VirtualBox"):  # overrides are validated too
        config.resolve(None, "vagrant-virtualbox")


# --- fuzz ----------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 100000), st.floats(
    allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["auto", "off", "0000:01:00.0", "01:00.0", "kvm", "qemu", "user",
                     *config.PROVIDERS, *config.COMPONENTS]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
keys = st.sampled_from([*sorted(config._TOP), "cpu", "gpus", "x"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, values, max_size=8),
       st.sampled_from([*config.PROVIDERS, "nope", 3]))
def test_fuzz_structured(data: dict, provider: object) -> None:
    data = {**data, "provider": provider}
    text = yaml.safe_dump(data)
    try:
        p = config.parse(text, "lab.yaml")
    except InputError as e:
        assert e.file == "lab.yaml" and e.problem
        return
    assert p.provider in config.PROVIDERS
    assert p.cpus >= 2 and p.memory >= 4 and p.disk >= 20
    assert set(p.components) <= set(config.COMPONENTS)
    # a valid profile survives a round trip through its own data
    assert config.validate(config.profile_to_data(p), "x").provider == p.provider


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_text(text: str) -> None:
    try:
        config.parse(text, "lab.yaml")
    except InputError as e:
        assert e.file == "lab.yaml"
