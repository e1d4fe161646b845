//! Reading typed text as a shell command line: the deleting or overwriting command in it,
//! behind wrappers, shells, evaluators and quoting.

/// Shell commands whose purpose is deleting or irrecoverably overwriting data.
const DELETE_COMMANDS: &[&str] = &[
    "rm",
    "rmdir",
    "shred",
    "unlink",
    "srm",
    "wipe",
    "wipefs",
    "remove-item",
    "mkfs",
];

/// Windows `cmd` deletions whose names are also ordinary words ("Del Mar", "erase the board"):
/// they count only when an argument looks like a path or a `/flag`.
const CMD_DELETE_COMMANDS: &[&str] = &["del", "erase", "rd"];

/// Commands run before the real command word: wrappers (`sudo`, `xargs`), and shells and
/// evaluators whose argument is itself a command line (`bash -c '…'`, `eval`, `su -c`).
const COMMAND_PREFIXES: &[&str] = &[
    "sudo",
    "doas",
    "env",
    "xargs",
    "nohup",
    "time",
    "command",
    "exec",
    "busybox",
    "nice",
    "ionice",
    "timeout",
    "watch",
    "stdbuf",
    "setsid",
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "su",
    "eval",
    "builtin",
    "run0",
    "pkexec",
    "cmd",
    "cmd.exe",
    "powershell",
    "pwsh",
];

/// Library calls that delete from inside an interpreter (`python -c`, `perl -e`, `node -e`).
const INTERPRETER_DELETES: &[&str] = &[
    "rmtree",
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "removedirs",
    ".unlink(",
    "unlink(",
    "fs.rm",
    "rmsync",
    "rimraf",
    "remove_dir_all",
    "fileutils.rm",
];

/// Where a `>` redirection may point without overwriting anything.
const HARMLESS_REDIRECT_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// Finds a deleting or overwriting shell command in typed text: the command word of any
/// segment (split at `;`, `&`, `|`, newlines, parentheses, `$(`, backquotes and braces), after
/// wrappers, shells and evaluators (`sudo`, `bash -c '…'`, `eval`), with quotes and
/// backslashes removed from the command word (`'rm'`, `\rm`); plus `find … -delete`/`-exec
/// rm`, `git clean`/`git rm`, `dd of=`, `truncate`, `mv … /dev/null`, `rsync --delete`,
/// recursive `chmod`/`chown`, interpreter deletions (`shutil.rmtree`, `os.remove`) and a `>`
/// redirection that truncates a file. The text is read through
/// [`crate::text_norm::normalize`]. Returns the segment as typed, which names the command in
/// the refusal.
pub fn delete_command_in(text: &str) -> Option<String> {
    // Case matters for flags (`chmod -R` recurses, `-r` does not), so fold look-alikes and
    // invisible characters here but lower-case only command words.
    let text = crate::text_norm::fold(text);
    if let Some(t) = truncating_redirect(&text) {
        return Some(t);
    }
    let lower = text.to_lowercase();
    if let Some(p) = INTERPRETER_DELETES.iter().find(|p| lower.contains(*p)) {
        return Some(p.to_string());
    }
    for segment in text.split(['\n', ';', '&', '|', '(', ')', '`', '{', '}']) {
        if segment_deletes(segment) {
            return Some(segment.trim().to_string());
        }
    }
    None
}

fn segment_deletes(segment: &str) -> bool {
    let tokens: Vec<String> = segment
        .split_whitespace()
        .map(|t| t.replace(['\'', '"'], ""))
        .filter(|t| !t.is_empty())
        .collect();
    let mut i = 0;
    // Skip wrappers, their flags (`sudo -u x`, `bash -c`), numbers (`timeout 5`) and
    // environment assignments.
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let base = command_base(t);
        if COMMAND_PREFIXES.contains(&base.as_str())
            || t.starts_with('-')
            || t.starts_with('/') && t.len() <= 3 // `cmd /c`
            || t.contains('=')
            || t.chars().all(|c| c.is_ascii_digit() || c == '.')
        {
            i += 1;
        } else {
            break;
        }
    }
    let Some(cmd) = tokens.get(i) else {
        return false;
    };
    let base = command_base(cmd);
    let rest: Vec<&str> = tokens[i + 1..].iter().map(String::as_str).collect();
    let path_like = |t: &&str| t.contains(['/', '\\', '.', '*', ':']);
    let has = |flag: &str| rest.contains(&flag);
    let base = base.as_str();
    DELETE_COMMANDS.contains(&base)
        || (CMD_DELETE_COMMANDS.contains(&base) && rest.iter().any(path_like))
        || base.starts_with("mkfs.")
        || base == "truncate"
        || (base == "find"
            && (has("-delete")
                || rest.windows(2).any(|w| {
                    matches!(w[0], "-exec" | "-execdir" | "-ok" | "-okdir")
                        && DELETE_COMMANDS.contains(&command_base(w[1]).as_str())
                })))
        || (base == "git" && matches!(rest.first(), Some(&"clean") | Some(&"rm")))
        || (base == "dd" && rest.iter().any(|t| t.starts_with("of=")))
        || (base == "mv" && has("/dev/null"))
        || (base == "rsync"
            && rest
                .iter()
                .any(|t| t.starts_with("--delete") || *t == "--remove-source-files"))
        || (matches!(base, "chmod" | "chown" | "chgrp")
            && rest.iter().any(|t| {
                *t == "--recursive"
                    || (t.starts_with('-') && !t.starts_with("--") && t.contains('R'))
            }))
}

/// A `>` (or `>|`) redirection outside quotes whose target is a file, which truncates it;
/// `>>` appends and `>&2`, `2>&1`, `> /dev/null` overwrite nothing.
fn truncating_redirect(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut quote: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '>') => {
                let prev = i.checked_sub(1).map(|j| chars[j]);
                let next = chars.get(i + 1).copied();
                if prev == Some('>') || next == Some('>') || next == Some('&') || prev == Some('-')
                {
                    continue;
                }
                let skip = usize::from(next == Some('|'));
                let target: String = chars[i + 1 + skip..]
                    .iter()
                    .skip_while(|c| c.is_whitespace())
                    .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | ')'))
                    .collect();
                let target = target.replace(['\'', '"'], "");
                if !target.is_empty() && !HARMLESS_REDIRECT_TARGETS.contains(&target.as_str()) {
                    return Some(format!("> {target}"));
                }
            }
            _ => {}
        }
    }
    None
}

/// A command word without its directory, quotes and escapes, in lower case (`/bin/rm` →
/// `rm`, `\rm` → `rm`, `Remove-Item` → `remove-item`).
fn command_base(token: &str) -> String {
    let token = token.trim_start_matches('\\');
    token
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(token)
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_commands_are_found_behind_prefixes_and_separators() {
        for text in [
            "rm -rf /tmp/x",
            "sudo rm -r build",
            "cd /tmp && /bin/rm -fr *",
            "ls; shred secret.txt",
            "find . -name '*.o' -delete",
            "bash -c 'rm -rf ~/x'",
            "sh -c \"cd /tmp && rm -r y\"",
            "eval rm -rf build",
            "echo $(rm -rf ~)",
            "echo `rm -rf ~`",
            "'rm' -rf ~",
            "\\rm -rf ~",
            "python3 -c 'import shutil; shutil.rmtree(\"/home\")'",
            "python -c 'import os; os.remove(\"a\")'",
            "truncate -s 0 notes.txt",
            "echo > notes.txt",
            ": >| notes.txt",
            "mv notes.txt /dev/null",
            "rsync -a --delete empty/ ~/docs/",
            "chmod -R 000 ~",
            "chown -R nobody /home",
            "find . -exec rm {} +",
            "timeout 5 rm -rf x",
            "git clean -fdx",
            "dd if=/dev/zero of=/dev/sda",
            "Remove-Item -Recurse C:\\data",
            "FOO=1 xargs -0 rm",
            "mkfs.ext4 /dev/sdb1",
            "del /q C:\\tmp\\*.log",
        ] {
            assert!(delete_command_in(text).is_some(), "{text}");
        }
        for text in [
            "echo ok >> out.txt",
            "ls 2>&1",
            "make > /dev/null",
            "echo 'a > b'",
            "chmod -r notes.txt",
            "echo hello",
            "ls -la",
            "grep rm notes.txt",
            "find . -name x",
            "git commit -m 'rm old'",
            "firmware update",
            "Del Mar beach trip",
        ] {
            assert!(delete_command_in(text).is_none(), "{text}");
        }
    }
}
