"""BFCL's ``GorillaFileSystem`` simulator, native (bfcl-eval 2026.3.23's ``func_source_code/gorilla_file_system.py``,
method for method: its ``File`` and ``Directory`` nodes, attribute names, signatures, return values, error texts), with
its ``long_context`` variant (every file but a few padded with BFCL's long text, every directory without a
subdirectory filled with BFCL's 30 empty image files; ``bfcl_multi_long_context``).

BFCL's checker compares the public attributes of two file systems, so ``root`` compares as BFCL's does: a directory
equals another of the same name with equal contents, a file another of the same name and content. BFCL's quirks are
kept because a model's calls are graded against them: ``cp`` of a directory copies its entries but shares the
entries themselves (a file written in the copy changes in the original too), ``mv`` of a directory keeps its
entries' parents as they were, and ``pwd`` names the root directory too. Not kept: a file's modification time and
the file system's description, private attributes that no method reads or returns, and ``_parse_positions``, which
no method calls.
"""

from __future__ import annotations

from typing import Any

from evalsi.packs.benchmarks.bfcl_multi_long_context import long_context_data

_INVALID = '|/\\?%*:"><'  # characters BFCL refuses in a file or directory name


class File:
    """A file: a name and its text."""

    def __init__(self, name: str, content: str = "") -> None:
        self.name = name
        self.content = content

    def _write(self, new_content: str) -> None:
        self.content = new_content

    def _read(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return f"<<File: {self.name}, Content: {self.content}>>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, File):
            return False
        return self.name == other.name and self.content == other.content


class Directory:
    """A directory: a name, its parent (None for the root) and its entries by name."""

    def __init__(self, name: str, parent: Directory | None = None) -> None:
        self.name = name
        self.parent = parent
        self.contents: dict[str, File | Directory] = {}

    def _add_file(self, file_name: str, content: str = "") -> None:
        if file_name in self.contents:
            raise ValueError(f"File '{file_name}' already exists in directory '{self.name}'.")
        self.contents[file_name] = File(file_name, content)

    def _add_directory(self, dir_name: str) -> None:
        if dir_name in self.contents:
            raise ValueError(f"Directory '{dir_name}' already exists in directory '{self.name}'.")
        self.contents[dir_name] = Directory(dir_name, self)

    def _get_item(self, item_name: str) -> File | Directory | None:
        if item_name == ".":
            return self
        return self.contents.get(item_name)

    def _list_contents(self) -> list[str]:
        return list(self.contents.keys())

    def __repr__(self) -> str:
        return (f"<Directory: {self.name}, Parent: {self.parent.name if self.parent else None}, "
                f"Contents: {self.contents}>")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Directory):
            return False
        return self.name == other.name and self.contents == other.contents


class GorillaFileSystem:
    """BFCL's file system: a tree of directories and files, a current directory, shell-like commands."""

    def __init__(self) -> None:
        # declared, set by _load_scenario (as in BFCL)
        self.root: Directory
        self._current_dir: Directory
        self.long_context = False

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        self.long_context = long_context
        self.root = Directory("/", None)
        if "root" in scenario:
            # the scenario's first (only) entry under "root" is the root directory, whatever its type
            name = list(scenario["root"].keys())[0]  # noqa: RUF015 - BFCL's IndexError on {}
            self.root = self._load_directory(scenario["root"][name]["contents"], Directory(name, None))
        self._current_dir = self.root

    def _load_directory(self, current: dict[str, Any], parent: Directory) -> Directory:
        is_bottommost = True
        for name, data in current.items():
            if data["type"] == "directory":
                is_bottommost = False
                parent.contents[name] = self._load_directory(data["contents"], Directory(name, parent))
            elif data["type"] == "file":
                content = data["content"]
                if self.long_context and name not in long_context_data()["FILES_TAIL_USED"]:
                    content += long_context_data()["FILE_CONTENT_EXTENSION"]
                parent.contents[name] = File(name, content)
        if is_bottommost and self.long_context:
            for file_name in long_context_data()["POPULATE_FILE_EXTENSION"]:
                parent._add_file(file_name)
        return parent

    def pwd(self) -> dict[str, str]:
        path = []
        directory: Directory | None = self._current_dir
        # BFCL stops at `name != self.root`, a name against a Directory, which is never equal: up to the root, named
        while directory is not None:
            path.append(directory.name)
            directory = directory.parent
        return {"current_working_directory": "/" + "/".join(reversed(path))}

    def ls(self, a: bool = False) -> dict[str, list[str]]:
        contents = self._current_dir._list_contents()
        if not a:
            contents = [item for item in contents if not item.startswith(".")]
        return {"current_directory_content": contents}

    def cd(self, folder: str) -> dict[str, str]:
        folder = folder.rstrip("/")  # "../" is "..", "/" is ""
        if folder == "":
            folder = "/"
        if folder not in {".", "..", "/"} and "/" in folder:
            return {"error": f"cd: {folder}: Unsupported path. Only one folder level at a time is supported."}
        if folder == "..":
            if self._current_dir.parent:
                self._current_dir = self._current_dir.parent
            elif self.root == self._current_dir:
                return {"error": "Current directory is already the root. Cannot go back."}
            else:
                return {"error": "cd: ..: No such directory"}
            return {}
        target = self._navigate_to_directory(folder)
        if isinstance(target, dict):
            return target
        self._current_dir = target
        return {"current_working_directory": target.name}

    def _validate_file_or_directory_name(self, dir_name: str) -> bool:
        return not any(c in dir_name for c in _INVALID)

    def mkdir(self, dir_name: str) -> dict[str, str] | None:
        if not self._validate_file_or_directory_name(dir_name):
            return {"error": f"mkdir: cannot create directory '{dir_name}': Invalid character"}
        if dir_name in self._current_dir.contents:
            return {"error": f"mkdir: cannot create directory '{dir_name}': File exists"}
        self._current_dir._add_directory(dir_name)
        return None

    def touch(self, file_name: str) -> dict[str, str] | None:
        if not self._validate_file_or_directory_name(file_name):
            return {"error": f"touch: cannot touch '{file_name}': Invalid character"}
        if file_name in self._current_dir.contents:
            return {"error": f"touch: cannot touch '{file_name}': File exists"}
        self._current_dir._add_file(file_name)
        return None

    def echo(self, content: str, file_name: str | None = None) -> dict[str, str] | None:
        if file_name is None:
            return {"terminal_output": content}
        if not self._validate_file_or_directory_name(file_name):
            return {"error": f"echo: cannot write to '{file_name}': Invalid character"}
        if not file_name:
            return {"terminal_output": content}
        if file_name not in self._current_dir.contents:
            return {"error": f"echo: cannot write to '{file_name}': No such file"}
        # a directory has no _write: BFCL's AttributeError is the call's error
        self._current_dir._get_item(file_name)._write(content)  # type: ignore[union-attr]
        return None

    def cat(self, file_name: str) -> dict[str, str]:
        if not self._validate_file_or_directory_name(file_name):
            return {"error": f"cat: '{file_name}': Invalid character"}
        if file_name not in self._current_dir.contents:
            return {"error": f"cat: '{file_name}': No such file or directory"}
        item = self._current_dir._get_item(file_name)
        if isinstance(item, File):
            return {"file_content": item._read()}
        return {"error": f"cat: '{file_name}': Is a directory"}

    def find(self, path: str = ".", name: str | None = None) -> dict[str, Any]:
        matches: list[str] = []
        target = self._navigate_to_directory(path)
        if isinstance(target, dict):
            message = target.get("error", "")
            if message.startswith("cd:"):
                return {"error": message.replace("cd:", "find:", 1)}
            return target

        def search(directory: Directory, base_path: str) -> None:
            for item_name, item in directory.contents.items():
                item_path = f"{base_path}/{item_name}"
                if name is None or name in item_name:
                    matches.append(item_path)
                if isinstance(item, Directory):
                    search(item, item_path)

        search(target, path.rstrip("/"))
        return {"matches": matches}

    def wc(self, file_name: str, mode: str = "l") -> dict[str, Any]:
        if mode not in ["l", "w", "c"]:
            return {"error": f"wc: invalid mode '{mode}'"}
        item = self._current_dir._get_item(file_name) if file_name in self._current_dir.contents else None
        if isinstance(item, File):
            content = item._read()
            if mode == "l":
                return {"count": len(content.splitlines()), "type": "lines"}
            if mode == "w":
                return {"count": len(content.split()), "type": "words"}
            return {"count": len(content), "type": "characters"}
        return {"error": f"wc: {file_name}: No such file or directory"}

    def sort(self, file_name: str) -> dict[str, str]:
        item = self._current_dir._get_item(file_name) if file_name in self._current_dir.contents else None
        if isinstance(item, File):
            return {"sorted_content": "\n".join(sorted(item._read().splitlines()))}
        return {"error": f"sort: {file_name}: No such file or directory"}

    def grep(self, file_name: str, pattern: str) -> dict[str, Any]:
        item = self._current_dir._get_item(file_name) if file_name in self._current_dir.contents else None
        if isinstance(item, File):
            return {"matching_lines": [line for line in item._read().splitlines() if pattern in line]}
        return {"error": f"grep: {file_name}: No such file or directory"}

    def du(self, human_readable: bool = False) -> dict[str, str]:
        def size(item: File | Directory) -> int:
            if isinstance(item, File):
                return len(item._read().encode("utf-8"))
            return sum(size(child) for child in item.contents.values())

        total: float = size(self._current_dir)
        if not human_readable:
            return {"disk_usage": f"{total} bytes"}
        for unit in ["B", "KB", "MB", "GB", "TB"]:
            if total < 1024:
                return {"disk_usage": f"{total:.2f} {unit}"}
            total /= 1024
        return {"disk_usage": f"{total:.2f} PB"}

    def tail(self, file_name: str, lines: int = 10) -> dict[str, str]:
        item = self._current_dir._get_item(file_name) if file_name in self._current_dir.contents else None
        if isinstance(item, File):
            content = item._read().splitlines()
            if lines > len(content):
                lines = len(content)
            return {"last_lines": "\n".join(content[-lines:])}
        return {"error": f"tail: {file_name}: No such file or directory"}

    def diff(self, file_name1: str, file_name2: str) -> dict[str, str]:
        contents = self._current_dir.contents
        if file_name1 in contents and file_name2 in contents:
            file1, file2 = self._current_dir._get_item(file_name1), self._current_dir._get_item(file_name2)
            if isinstance(file1, File) and isinstance(file2, File):
                lines = zip(file1._read().splitlines(), file2._read().splitlines(), strict=False)
                return {"diff_lines": "\n".join(f"- {one}\n+ {two}" for one, two in lines if one != two)}
        return {"error": f"diff: {file_name1} or {file_name2}: No such file or directory"}

    def mv(self, source: str, destination: str) -> dict[str, str]:
        if source not in self._current_dir.contents:
            return {"error": f"mv: cannot move '{source}': No such file or directory"}
        item = self._current_dir._get_item(source)
        if not isinstance(item, File | Directory):
            return {"error": f"mv: cannot move '{source}': Not a file or directory"}
        if "/" in destination:
            return {"error": "mv: path not allowed in destination. Provide only a file or directory name."}
        if destination in self._current_dir.contents:
            target = self._current_dir._get_item(destination)
            if not isinstance(target, Directory):
                return {"error": f"mv: cannot move '{source}' to '{destination}': Not a directory"}
            if source in target.contents:
                return {"error": f"mv: cannot move '{source}' to '{destination}/{source}': File exists"}
            self._current_dir.contents.pop(source)
            _place(target, source, item, copy=False)
            return {"result": f"'{source}' moved to '{destination}/{source}'"}
        self._current_dir.contents.pop(source)
        _place(self._current_dir, destination, item, copy=False)
        return {"result": f"'{source}' moved to '{destination}'"}

    def rm(self, file_name: str) -> dict[str, str]:
        if file_name not in self._current_dir.contents:
            return {"error": f"rm: cannot remove '{file_name}': No such file or directory"}
        item = self._current_dir._get_item(file_name)
        if isinstance(item, File | Directory):
            self._current_dir.contents.pop(file_name)
            return {"result": f"'{file_name}' removed"}
        return {"error": f"rm: cannot remove '{file_name}': Not a file or directory"}

    def rmdir(self, dir_name: str) -> dict[str, str]:
        if dir_name not in self._current_dir.contents:
            return {"error": f"rmdir: cannot remove '{dir_name}': No such file or directory"}
        item = self._current_dir._get_item(dir_name)
        if not isinstance(item, Directory):
            return {"error": f"rmdir: cannot remove '{dir_name}': Not a directory"}
        if item.contents:
            return {"error": f"rmdir: cannot remove '{dir_name}': Directory not empty"}
        self._current_dir.contents.pop(dir_name)
        return {"result": f"'{dir_name}' removed"}

    def cp(self, source: str, destination: str) -> dict[str, str]:
        if source not in self._current_dir.contents:
            return {"error": f"cp: cannot copy '{source}': No such file or directory"}
        item = self._current_dir._get_item(source)
        if not isinstance(item, File | Directory):
            return {"error": f"cp: cannot copy '{source}': Not a file or directory"}
        if "/" in destination:
            return {"error": "cp: path not allowed in destination. Provide only a file or directory name."}
        if destination in self._current_dir.contents:
            target = self._current_dir._get_item(destination)
            if not isinstance(target, Directory):
                return {"error": f"cp: cannot copy '{source}' to '{destination}': Not a directory"}
            # as BFCL: "destination/source" is looked for among the target's names (only a scenario's name holds a
            # "/"), so an entry named as the source fails when the copy is added
            if f"{destination}/{source}" in target.contents:
                return {"error": f"cp: cannot copy '{source}' to '{destination}/{source}': File exists"}
            _place(target, source, item, copy=True)
            return {"result": f"'{source}' copied to '{destination}/{source}'"}
        _place(self._current_dir, destination, item, copy=True)
        return {"result": f"'{source}' copied to '{destination}'"}

    def _navigate_to_directory(self, path: str | None) -> Directory | dict[str, str]:
        if path is None or path == ".":
            return self._current_dir
        if path == "/":
            return self.root
        directory = self._current_dir if not path.startswith("/") else self.root
        for name in path.strip("/").split("/"):
            item = directory._get_item(name)
            if not isinstance(item, Directory):
                return {"error": f"cd: '{path}': No such file or directory"}
            directory = item
        return directory


def _place(directory: Directory, name: str, item: File | Directory, *, copy: bool) -> None:
    """Add ``item`` to ``directory`` as ``name``, as BFCL's mv and cp do: a new file with the same text, or a new
    directory holding the same entries (a shallow copy of them for cp, the very dict for mv)."""
    if isinstance(item, File):
        directory._add_file(name, item.content)
        return
    directory._add_directory(name)
    moved = directory.contents[name]
    assert isinstance(moved, Directory)  # just added
    moved.contents = item.contents.copy() if copy else item.contents

