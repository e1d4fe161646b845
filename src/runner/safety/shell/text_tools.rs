//! `sed` and `awk`: their scripts are read, so `sed -i`, `w file`, `e`, `system()` and
//! `print > "file"` are found.

use super::opts::Opts;
use super::walker::{Arg, Invocation, Walker};

// ─── sed and awk ────────────────────────────────────────────────────────────

pub(super) fn sed(w: &mut Walker<'_>, inv: &Invocation) {
    let mut scripts: Vec<Arg> = Vec::new();
    let mut files: Vec<Arg> = Vec::new();
    let mut in_place: Option<String> = None;
    let mut sandbox = false;
    let mut i = 0;
    let args = &inv.args;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(s) = arg.fixed().filter(|_| arg.is_option()) else {
            files.push(arg.clone());
            continue;
        };
        match s {
            "--" => {
                files.extend(args[i..].iter().cloned());
                break;
            }
            "-e" | "--expression" => {
                scripts.extend(args.get(i).cloned());
                i += 1;
            }
            "-f" | "--file" => {
                w.need_shell("sed reading its script from a file");
                i += 1;
            }
            "-l" | "--line-length" => i += 1,
            "--sandbox" => sandbox = true,
            _ if s.starts_with("--expression=") => {
                scripts.push(Arg::Fixed(s["--expression=".len()..].to_string()))
            }
            _ if s.starts_with("--file=") => w.need_shell("sed reading its script from a file"),
            _ if s.starts_with("--in-place") => {
                in_place = Some(
                    s.split_once('=')
                        .map(|(_, v)| v.to_string())
                        .unwrap_or_default(),
                )
            }
            _ if !s.starts_with("--") => {
                // A short cluster: `-i` takes the rest as a backup suffix; `-e`/`-f` the next
                // word unless the rest of the cluster is it.
                let cluster: Vec<char> = s[1..].chars().collect();
                for (k, c) in cluster.iter().enumerate() {
                    let rest: String = cluster[k + 1..].iter().collect();
                    match c {
                        'i' => {
                            in_place = Some(rest);
                            break;
                        }
                        'e' => {
                            if rest.is_empty() {
                                scripts.extend(args.get(i).cloned());
                                i += 1;
                            } else {
                                scripts.push(Arg::Fixed(rest));
                            }
                            break;
                        }
                        'f' => {
                            w.need_shell("sed reading its script from a file");
                            if rest.is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        'l' => {
                            if rest.is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if scripts.is_empty() && !files.is_empty() {
        scripts.push(files.remove(0));
    }
    for script in &scripts {
        match script.fixed().map(sed_effects) {
            _ if sandbox => {}
            Some(Some(effects)) => {
                if effects.executes {
                    w.need_shell("sed running a command (its e command or s///e)");
                }
                for file in effects.writes {
                    w.write_target(&Arg::Fixed(file), "sed's w command");
                }
            }
            Some(None) => w.need_shell("a sed script the gate cannot read"),
            None => w.need_shell("a sed script known only when the line runs"),
        }
    }
    // `-i.bak` keeps the old contents in a backup; a bare `-i` replaces them.
    if in_place.as_deref() == Some("") {
        for file in &files {
            w.modify(file, "editing {} in place with sed -i");
        }
    }
}

/// What a sed script does besides printing.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct SedEffects {
    /// Files its `w`/`W` commands and `s///w` flags write.
    pub writes: Vec<String>,
    /// Whether it runs commands (`e`, `s///e`).
    pub executes: bool,
}

/// Reads a sed script command by command; `None` when it holds something the reader does
/// not know (judged as unknown).
pub(super) fn sed_effects(script: &str) -> Option<SedEffects> {
    let s: Vec<char> = script.chars().collect();
    let mut fx = SedEffects::default();
    let mut i = 0;
    let to_eol = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && s[*i] != '\n' {
            *i += 1;
        }
        s[start..*i].iter().collect::<String>().trim().to_string()
    };
    let delimited = |i: &mut usize, delim: char| -> Option<()> {
        while *i < s.len() {
            match s[*i] {
                '\\' => *i += 2,
                c if c == delim => {
                    *i += 1;
                    return Some(());
                }
                '\n' if delim != '\n' => return None,
                _ => *i += 1,
            }
        }
        None
    };
    while i < s.len() {
        match s[i] {
            ' ' | '\t' | '\n' | ';' | '}' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        // Addresses: numbers, `$`, `/re/`, `\cREc`, with `,`, `~N`, `+N` and `!`.
        loop {
            match s.get(i) {
                Some(c) if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | '!' | ' ') => {
                    i += 1
                }
                Some('/') => {
                    i += 1;
                    delimited(&mut i, '/')?;
                    while matches!(s.get(i), Some('I' | 'M')) {
                        i += 1;
                    }
                }
                Some('\\') => {
                    let d = *s.get(i + 1)?;
                    i += 2;
                    delimited(&mut i, d)?;
                }
                _ => break,
            }
        }
        let Some(&cmd) = s.get(i) else { break };
        i += 1;
        match cmd {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'l' | 'L' | 'q' | 'Q' => {
                while s.get(i).is_some_and(char::is_ascii_digit) {
                    i += 1;
                }
            }
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' | 'v' => {
                to_eol(&mut i);
            }
            ':' | 'b' | 't' | 'T' => {
                while i < s.len() && !matches!(s[i], ';' | '\n' | '}') {
                    i += 1;
                }
            }
            'w' | 'W' => fx.writes.push(to_eol(&mut i)),
            'e' => {
                fx.executes = true;
                to_eol(&mut i);
            }
            's' | 'y' => {
                let d = *s.get(i)?;
                if d == '\\' || d == '\n' {
                    return None;
                }
                i += 1;
                delimited(&mut i, d)?;
                delimited(&mut i, d)?;
                if cmd == 's' {
                    while let Some(&f) = s.get(i) {
                        match f {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            c if c.is_ascii_digit() => i += 1,
                            'e' => {
                                fx.executes = true;
                                i += 1;
                            }
                            'w' => {
                                i += 1;
                                fx.writes.push(to_eol(&mut i));
                            }
                            _ => break,
                        }
                    }
                }
            }
            _ => return None,
        }
    }
    Some(fx)
}

pub(super) fn awk(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-F",
            "-v",
            "-f",
            "-e",
            "-i",
            "-l",
            "-E",
            "--field-separator",
            "--assign",
            "--file",
            "--source",
            "--include",
            "--load",
            "--exec",
        ],
    );
    if opts.has(&["-f", "--file", "-l", "--load", "-E", "--exec"]) {
        w.need_shell(format!("{} running a program from a file", inv.name));
    }
    let mut in_place = false;
    for inc in opts.values(&["-i", "--include"]) {
        if inc.fixed() == Some("inplace") {
            in_place = true;
        } else {
            w.need_shell(format!("{} loading an include file", inv.name));
        }
    }
    let mut operands = opts.operands.clone();
    let mut programs = opts.values(&["-e", "--source"]);
    if programs.is_empty() && !opts.has(&["-f", "--file"]) && !operands.is_empty() {
        programs.push(operands.remove(0));
    }
    for program in &programs {
        match program.fixed() {
            Some(text) => awk_program(w, text, &inv.name),
            None => w.need_shell("an awk program known only when the line runs"),
        }
    }
    if in_place {
        for file in operands.iter().filter(|a| !a.text().contains('=')) {
            w.modify(file, "editing {} in place with awk -i inplace");
        }
    }
}

/// An awk program runs commands through `system()` and pipes, and writes files with
/// `print > "file"`.
pub(super) fn awk_program(w: &mut Walker<'_>, program: &str, name: &str) {
    let code = strip_awk_strings_and_regexes(program);
    if code.contains("system") || code.replace("||", "").contains('|') {
        w.need_shell(format!("{name} running a command (system() or a pipe)"));
    }
    // Output redirections inside print/printf statements.
    let bytes: Vec<char> = program.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..].iter().take(6).collect();
        let at_word = i == 0 || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_');
        if at_word && rest.starts_with("print") {
            // Scan the statement for a '>' at parenthesis depth 0, outside strings.
            let mut j = i + 5;
            let mut depth = 0i32;
            let mut in_string = false;
            while j < bytes.len() {
                let c = bytes[j];
                if in_string {
                    if c == '\\' {
                        j += 1;
                    } else if c == '"' {
                        in_string = false;
                    }
                } else {
                    match c {
                        '"' => in_string = true,
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        ';' | '\n' | '}' if depth <= 0 => break,
                        '>' if depth <= 0 => {
                            if bytes.get(j + 1) != Some(&'>') && bytes.get(j - 1) != Some(&'>') {
                                let target: String = bytes[j + 1..].iter().collect();
                                let target = target.trim_start();
                                match target.strip_prefix('"').and_then(|t| t.split_once('"')) {
                                    Some((file, _)) => {
                                        w.write_target(&Arg::Fixed(file.to_string()), name)
                                    }
                                    None => w.write_target(
                                        &Arg::Dynamic(target.chars().take(40).collect()),
                                        name,
                                    ),
                                }
                            }
                            break;
                        }
                        _ => {}
                    }
                }
                j += 1;
            }
            i = j;
        }
        i += 1;
    }
}

/// An awk program with its string literals and regular expressions blanked, so a `|` or the
/// word `system` inside them does not count.
pub(super) fn strip_awk_strings_and_regexes(program: &str) -> String {
    let chars: Vec<char> = program.chars().collect();
    let mut out = String::with_capacity(program.len());
    let mut i = 0;
    let mut last_significant = ' ';
    while i < chars.len() {
        let c = chars[i];
        let regex_start = c == '/'
            && matches!(
                last_significant,
                ' ' | '(' | ',' | '!' | '~' | '{' | ';' | '&' | '|' | '\n'
            );
        if c == '"' || regex_start {
            let close = c;
            i += 1;
            while i < chars.len() && chars[i] != close {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push(' ');
            i += 1;
            last_significant = 'x';
            continue;
        }
        out.push(c);
        if !c.is_whitespace() || c == '\n' {
            last_significant = c;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_are_read_command_by_command() {
        let plain = sed_effects("s/a/b/g; /x/d; 1,3p; y/abc/xyz/").unwrap_or_default();
        assert_eq!(plain, SedEffects::default());
        let writes = sed_effects("s/a/b/w out.txt").unwrap_or_default();
        assert_eq!(writes.writes, vec!["out.txt".to_string()]);
        assert!(sed_effects("1e rm -rf ~").is_some_and(|e| e.executes));
        assert!(sed_effects("s/x/rm -rf ~/e").is_some_and(|e| e.executes));
        assert!(sed_effects("/re/w log").is_some_and(|e| e.writes == ["log"]));
        assert!(sed_effects("s|a|b|").is_some_and(|e| e == SedEffects::default()));
        assert!(sed_effects("k").is_none());
    }
}
