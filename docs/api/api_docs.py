#!/usr/bin/env python3
"""Builds spsd's API reference with Doxygen, or checks that every public entity has a comment.

  api_docs.py SOURCE_ROOT OUTPUT VERSION           HTML under OUTPUT/html (`ninja -C build docs`)
  api_docs.py --check SOURCE_ROOT OUTPUT           the `docs` test suite (docs/build.md)

Both filter include/spsd through comment_filter.py into OUTPUT/include and run docs/api/Doxyfile.
--check turns HTML off and fails (exit 1) when Doxygen reports an undocumented class, struct,
union, enum or function (a member function or friend too) outside the detail namespaces, unless
test/docs/undocumented.txt lists it; an entry of that list that now has a comment fails as well,
so the list only shrinks. Exit 77 (a skip) when doxygen is not installed.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # nothing written into the source tree
import comment_filter  # noqa: E402

# "Member f(int x) const (function) of class spsd::X is not documented." and
# "Compound spsd::X is not documented."
MEMBER = re.compile(r'^(?P<file>[^:]+):\d+: warning: Member (?P<name>.*) \((?P<kind>\w+)\) of '
                    r'(?P<scope_kind>\w+) (?P<scope>\S+) is not documented\.$')
COMPOUND = re.compile(r'^(?P<file>[^:]+):\d+: warning: Compound (?P<name>\S+) is not documented\.$')
REQUIRED_KINDS = {'function', 'friend', 'enumeration'}


def run_doxygen(source, output, version, html):
    if shutil.which('doxygen') is None:
        print('doxygen is not installed (Debian: apt-get install doxygen, or tools/lib.sh\'s '
              'spsd_install_packages)', file=sys.stderr)
        sys.exit(77)
    filtered = output / 'include'
    shutil.rmtree(filtered, ignore_errors=True)
    filtered.mkdir(parents=True)
    sys.argv = ['comment_filter.py', '--tree', str(source / 'include'), str(filtered)]
    comment_filter.main()
    config = (HERE / 'Doxyfile').read_text(encoding='utf-8')
    if not html:
        config += '\nGENERATE_HTML = NO\n'
    env = dict(os.environ, SPSD_API_OUTPUT=str(output), SPSD_API_SOURCE=str(source),
               SPSD_API_VERSION=version)
    # Its output is noise (with HTML off: "No output formats selected!") unless it fails.
    done = subprocess.run(['doxygen', '-'], input=config, text=True, env=env, capture_output=True)
    if done.returncode != 0:
        sys.exit(f'doxygen failed (exit {done.returncode}):\n{done.stdout}{done.stderr}')
    # Warnings name the filtered copies; report the headers themselves.
    warnings = (output / 'warnings.txt').read_text(encoding='utf-8').splitlines()
    return [w.replace(str(filtered), str(source / 'include')) for w in warnings]


def undocumented(warnings, source):
    """The required entities Doxygen found without a comment, as 'header: kind name' lines."""
    found = set()
    for w in warnings:
        m = MEMBER.match(w)
        if m and m['kind'] in REQUIRED_KINDS:
            found.add(f"{os.path.relpath(m['file'], source)}: {m['kind']} {m['scope']}::{m['name']}")
            continue
        m = COMPOUND.match(w)
        if m:
            found.add(f"{os.path.relpath(m['file'], source)}: compound {m['name']}")
    return found


def check(source, output):
    output.mkdir(parents=True, exist_ok=True)
    found = undocumented(run_doxygen(source, output, '', html=False), source)
    listed_file = source / 'test' / 'docs' / 'undocumented.txt'
    listed = {line for line in listed_file.read_text(encoding='utf-8').splitlines()
              if line and not line.startswith('#')}
    new, fixed = sorted(found - listed), sorted(listed - found)
    for entity in new:
        print(f'no comment: {entity}')
    for entity in fixed:
        print(f'documented now, delete its line from test/docs/undocumented.txt: {entity}')
    print(f'{len(found)} public entities without a comment, {len(listed)} listed as known, '
          f'{len(new)} new, {len(fixed)} fixed')
    return 1 if new or fixed else 0


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == '--check':
        sys.exit(check(pathlib.Path(args[1]).resolve(), pathlib.Path(args[2]).resolve()))
    if len(args) != 3:
        sys.exit(__doc__)
    source, output = pathlib.Path(args[0]).resolve(), pathlib.Path(args[1]).resolve()
    output.mkdir(parents=True, exist_ok=True)
    warnings = run_doxygen(source, output, args[2], html=True)
    print(f'{output / "html" / "index.html"} ({len(warnings)} Doxygen warnings in {output / "warnings.txt"})')


if __name__ == '__main__':
    main()
