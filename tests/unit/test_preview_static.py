"""The dry run's static half: a role's tasks read as the changes they can make, rendered with
the variables known before the run (group_vars, defaults, extra vars), on a small playbook
written here."""

from __future__ import annotations

from pathlib import Path

from lab.provision import preview


def _playbook(tmp_path: Path) -> Path:
    (tmp_path / "group_vars/all").mkdir(parents=True)
    (tmp_path / "group_vars/all/v.yml").write_text(
        "state_dir: /var/lib/demo\nis_vm: \"{{ provider is match('vagrant-') }}\"\n"
        "sysctls: {net.ipv4.ip_forward: 1, fs.inotify.max_user_instances: 1280}\n")
    role = tmp_path / "roles/demo"
    (role / "tasks").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "handlers").mkdir()
    (role / "defaults/main.yml").write_text("pkgs: [socat, conntrack]\n")
    (role / "handlers/main.yml").write_text(
        "- name: Apply sysctls\n  ansible.builtin.command: sysctl --system\n"
        "  changed_when: true\n")
    (role / "tasks/extra.yml").write_text(
        "- name: Make the work folders\n  ansible.builtin.file:\n    path: \"{{ item }}\"\n"
        "    state: directory\n  loop: [\"{{ state_dir }}/a\", \"{{ state_dir }}/b\"]\n")
    (role / "tasks/main.yml").write_text("""
- name: Probe
  ansible.builtin.command: dpkg-query -W
  register: probe
  changed_when: false
- name: Install packages
  ansible.builtin.apt:
    name: "{{ missing }}"
  vars:
    missing: "{{ pkgs | difference(probe.stdout_lines) }}"
- name: Swap off, on a VM only
  ansible.builtin.command: swapoff -a
  when: is_vm | bool
- name: Write the sysctls
  ansible.builtin.copy:
    dest: /etc/sysctl.d/90-demo.conf
    content: |
      {% for k, v in sysctls.items() %}
      {{ k }} = {{ v }}
      {% endfor %}
  notify: Apply sysctls
- name: A secret file
  ansible.builtin.copy:
    dest: /etc/demo/token
    content: "token-{{ state_dir }}"
  no_log: true
- name: More
  ansible.builtin.import_tasks: extra.yml
- name: Start the service
  ansible.builtin.systemd_service:
    name: demo
    state: started
    enabled: true
""")
    book = tmp_path / "site.yml"
    book.write_text("- hosts: lab\n  roles:\n    - role: demo\n      tags: [demo]\n")
    return book


def test_static_changes_render_what_is_known(tmp_path: Path) -> None:
    book = _playbook(tmp_path)
    host = {c.task: c for c in preview.static_changes(book, ["demo"], {"provider": "host"})}
    assert "Probe" not in host  # a probe (changed_when: false) changes nothing
    assert "Swap off, on a VM only" not in host  # its `when` is decided before the run
    pkgs = host["Install packages"]
    assert pkgs.kind == "package" and pkgs.target == "(known at run time)"
    assert any("socat, conntrack" in d for d in pkgs.detail)
    sysctl = host["Write the sysctls"]
    assert sysctl.target == "/etc/sysctl.d/90-demo.conf"
    assert "net.ipv4.ip_forward = 1" in sysctl.detail
    assert "fs.inotify.max_user_instances = 1280" in sysctl.detail
    secret = host["A secret file"]
    assert not any("token-" in d for d in secret.detail)  # no_log: never shown
    assert host["Make the work folders"].target == "/var/lib/demo/a, /var/lib/demo/b"
    svc = host["Start the service"]
    assert svc.kind == "service" and svc.target == "demo" and "enabled True" in svc.detail[0]
    handler = host["Apply sysctls"]
    assert handler.handler and handler.target == "sysctl --system"
    assert all(c.status == "planned" for c in host.values())

    vm = {c.task: c for c in preview.static_changes(book, ["demo"],
                                                    {"provider": "vagrant-libvirt"})}
    assert vm["Swap off, on a VM only"].kind == "swap"
    assert preview.static_changes(book, ["other"], {"provider": "host"}) == []


def test_merge_marks_what_check_mode_saw(tmp_path: Path) -> None:
    book = _playbook(tmp_path)
    changes = preview.static_changes(book, ["demo"], {"provider": "host"})
    events = [
        {"event": "result", "role": "demo", "task": "Install packages", "status": "ok",
         "changed": True, "diff": [{"prepared": "The following NEW packages will be "
                                               "installed:\n  socat\n0 upgraded"}]},
        {"event": "result", "role": "demo", "task": "Write the sysctls", "status": "ok",
         "changed": False},
        {"event": "result", "role": "demo", "task": "Start the service", "status": "failed",
         "msg": "Could not find the requested service demo"},
    ]
    stopped = preview.merge(changes, events)
    by = {c.task: c for c in changes}
    assert by["Install packages"].status == "change" and by["Install packages"].target == "socat"
    assert by["Write the sysctls"].status == "ok"
    assert by["Apply sysctls"].status == "skip"  # its only notifier would not change
    assert by["Start the service"].status == "failed"
    assert by["Make the work folders"].status == "planned"  # no result: not observed
    assert "check mode stopped at 'demo : Start the service'" in stopped
