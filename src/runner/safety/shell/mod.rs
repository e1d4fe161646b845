//! Typed command lines, judged by a real shell parser: [`brush_parser`] (the POSIX/bash
//! grammar of the brush shell, pure Rust) turns a line into its syntax tree, and the walker
//! here visits every simple command in it — pipelines, `&&`/`||` lists, subshells, brace
//! groups, `if`/`for`/`while`/`case` bodies, function bodies, command and process
//! substitutions, here-documents and here-strings — and the command lines hidden in
//! arguments (`sh -c`, `su -c`, `ssh host …`, `xterm -e`, `env -S`, `watch`, `eval`), behind
//! wrappers (`sudo` with its options' arguments, `env`, `nice`, `nohup`, `timeout`, `time`,
//! `command`, `exec`, `busybox`, `xargs`, `find -exec`, `systemd-run`, …).
//!
//! Default-deny: a command word that cannot be resolved without running anything (`$X`,
//! `$(…)`, a glob, a brace expansion, a path to a script) needs the `shell` grant, and so does
//! a command on the `PATH` or a shell builtin that is not in the documented tables of
//! `commands.rs`; a command that exists nowhere (not on the `PATH`, not a builtin) only
//! prints "command not found", which is why typed prose ("Ada Lovelace⏎") passes. The
//! tables say what each known command needs (`rm` deletes its operands, `cp` overwrites an
//! existing destination, `git push --force` overwrites a remote, …). What a command writes
//! is checked on disk: a redirect or a copy onto a file that does not exist creates it and
//! needs nothing; a relative path is checked in the working directories of the shells at a
//! prompt ([`HostFacts::shells_at_prompt`]), and when those are unknown it counts as an
//! existing file.

mod commands;
mod files;
mod git;
mod machine;
mod network;
mod opts;
mod paths;
mod text_tools;
mod variables;
mod walker;
mod words;
mod wrappers;

pub use commands::{
    CREATING as CREATING_COMMANDS, INTERACTIVE as INTERACTIVE_COMMANDS,
    READ_ONLY as READ_ONLY_COMMANDS,
};

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use walker::{Arg, Invocation, Stdin, Walker};

use brush_parser::ast;
use brush_parser::word::{self, WordPiece};
use brush_parser::{ParseError, Parser, ParserOptions};

use super::host::{FileKind, HostFacts};
use super::refusal::Need;

/// Longest text parsed as a command line; anything longer needs the `shell` grant (no
/// agent types a legitimate command this long, and the parser's cost grows with it).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// Deepest nesting of brackets and quotes handed to the parser (its recursion is bounded by
/// this, so a hostile line cannot exhaust the stack).
const MAX_BRACKET_DEPTH: usize = 64;
/// Deepest nesting of command lines inside command lines (`sh -c "$(bash -c '…')"`).
const MAX_SCRIPT_DEPTH: usize = 12;

/// How a command line parsed.
#[derive(Debug)]
pub(super) enum Parsed {
    /// Complete: these are the permissions it needs (possibly none).
    Complete(Vec<Need>),
    /// Not finished (an open quote, `&&` at the end, an unterminated here-document): a shell
    /// waits for more and runs nothing yet.
    Incomplete,
    /// A syntax error in the bash grammar: a bash-family shell runs nothing of it. `needs` is
    /// what a word-by-word reading found (see [`fallback_scan`]): the line still needs those,
    /// for a shell outside the bash family (fish) and for a construct the parser and bash
    /// read differently.
    SyntaxError(Vec<Need>),
}

/// What a complete command line needs, judged as typed into a shell at a prompt on `host`;
/// `None` while it is incomplete (an open quote, `&&` at the end). A line that is a syntax
/// error is judged word by word.
pub fn command_line_needs(text: &str, host: &dyn HostFacts) -> Option<Vec<Need>> {
    match judge_line(text, host) {
        Parsed::Complete(n) | Parsed::SyntaxError(n) => Some(n),
        Parsed::Incomplete => None,
    }
}

/// Judges one submitted command line (or several lines, as a script).
pub(super) fn judge_line(text: &str, host: &dyn HostFacts) -> Parsed {
    let mut w = Walker::new(host);
    match parse(text) {
        Ok(program) => {
            w.program(&program);
            Parsed::Complete(w.needs)
        }
        Err(Failure::Incomplete) => Parsed::Incomplete,
        Err(Failure::Syntax) => {
            fallback_scan(&mut w, text);
            Parsed::SyntaxError(w.needs)
        }
        Err(Failure::TooComplex(why)) => {
            w.need_shell(why);
            Parsed::Complete(w.needs)
        }
    }
}

enum Failure {
    Incomplete,
    Syntax,
    TooComplex(String),
}

fn parse(text: &str) -> Result<ast::Program, Failure> {
    if text.len() > MAX_LINE_BYTES {
        return Err(Failure::TooComplex(format!(
            "a command line of {} bytes, longer than the gate reads ({MAX_LINE_BYTES})",
            text.len()
        )));
    }
    if bracket_depth(text) > MAX_BRACKET_DEPTH {
        return Err(Failure::TooComplex(
            "a command line nested deeper than the gate reads".to_string(),
        ));
    }
    let options = ParserOptions::default();
    // The parser is a third-party crate fed hostile text: a panic in it is a line the gate
    // cannot judge, never a crash of the run.
    let result = catch_unwind(AssertUnwindSafe(|| {
        Parser::new(Cursor::new(text.as_bytes()), &options).parse_program()
    }));
    match result {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(ParseError::ParsingAtEndOfInput)) => Err(Failure::Incomplete),
        Ok(Err(ParseError::Tokenizing { inner, .. })) if inner.is_incomplete() => {
            Err(Failure::Incomplete)
        }
        Ok(Err(_)) => Err(Failure::Syntax),
        Err(_) => Err(Failure::TooComplex(
            "a command line the shell parser could not read".to_string(),
        )),
    }
}

/// The deepest nesting of `(`, `{`, `[` and backquotes, ignoring quotes (an over-estimate is
/// fine: it only bounds the parser's recursion).
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max, mut backquote) = (0usize, 0usize, false);
    for c in text.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => {
                backquote = !backquote;
                if backquote {
                    depth += 1;
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
            _ => {}
        }
        max = max.max(depth);
    }
    max
}

/// What a line the parser rejects is judged by, word by word: any word that names a command
/// other than a read-only one (as a bare name, or a path to an existing executable) needs the
/// `shell` grant. A bash-family shell would run nothing of the line, but another shell may,
/// and the parser may disagree with bash on a rare construct.
fn fallback_scan(w: &mut Walker<'_>, text: &str) {
    let tokens = brush_parser::tokenize_str(text).ok();
    let words: Vec<String> = match tokens {
        Some(tokens) => tokens
            .iter()
            .filter_map(|t| match t {
                brush_parser::Token::Word(s, _) => Some(s.clone()),
                brush_parser::Token::Operator(..) => None,
            })
            .collect(),
        None => text.split_whitespace().map(str::to_string).collect(),
    };
    for raw in words {
        let bare: String = raw
            .chars()
            .filter(|c| !matches!(c, '\'' | '"' | '\\' | '(' | ')' | '{' | '}' | '`' | '$'))
            .collect();
        let name = bare.rsplit('/').next().unwrap_or(&bare);
        if name.is_empty() || commands::is_read_only(name) {
            continue;
        }
        let known = commands::is_known(name) || w.host.on_path(name);
        let executable_path =
            bare.contains('/') && matches!(w.host.file_kind(Path::new(&bare)), FileKind::File);
        if known || executable_path {
            w.need_shell(format!(
                "a line the shell parser cannot read that names `{name}`"
            ));
            return;
        }
    }
}

impl Walker<'_> {
    // ── Syntax tree ──

    fn program(&mut self, program: &ast::Program) {
        for list in &program.complete_commands {
            self.compound_list(list);
        }
    }

    fn compound_list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for (i, command) in pipeline.seq.iter().enumerate() {
            let stdin = if i == 0 { Stdin::Terminal } else { Stdin::Pipe };
            self.command(command, stdin);
        }
    }

    fn command(&mut self, command: &ast::Command, stdin: Stdin) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, stdin),
            ast::Command::Compound(compound, redirects) => {
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
                self.compound(compound);
            }
            ast::Command::Function(def) => {
                self.need_shell(format!(
                    "defining the function `{}`, which changes what a later command runs",
                    def.fname.value
                ));
                let ast::FunctionBody(body, redirects) = &def.body;
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
                self.compound(body);
            }
            ast::Command::ExtendedTest(test, redirects) => {
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
                self.extended_test(&test.expr);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&e.value);
                }
                self.compound_list(&f.body.list);
            }
            C::BraceGroup(b) => self.compound_list(&b.list),
            C::Subshell(s) => self.compound_list(&s.list),
            C::ForClause(f) => {
                for v in f.values.iter().flatten() {
                    self.arg(&v.value);
                }
                self.compound_list(&f.body.list);
            }
            C::CaseClause(c) => {
                self.arg(&c.value.value);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.arg(&p.value);
                    }
                    if let Some(list) = &item.cmd {
                        self.compound_list(list);
                    }
                }
            }
            C::IfClause(i) => {
                self.compound_list(&i.condition);
                self.compound_list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.compound_list(c);
                    }
                    self.compound_list(&e.body);
                }
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.compound_list(&w.0);
                self.compound_list(&w.1.list);
            }
            C::Coprocess(c) => self.command(&c.body, Stdin::Pipe),
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr) {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a);
                self.extended_test(b);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a),
            E::UnaryTest(_, w) => {
                self.arg(&w.value);
            }
            E::BinaryTest(_, a, b) => {
                self.arg(&a.value);
                self.arg(&b.value);
            }
        }
    }

    /// An arithmetic expression runs nothing unless it holds a command substitution.
    fn arithmetic(&mut self, expr: &str) {
        if expr.contains("$(") || expr.contains('`') {
            self.need_shell("a command substitution inside an arithmetic expression");
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, stdin: Stdin) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut stdin = stdin;
        let mut words: Vec<(String, Arg)> = Vec::new();
        let mut assignments: Vec<String> = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::AssignmentWord(assignment, _) => {
                    assignments.push(self.assignment(assignment));
                }
                Item::IoRedirect(r) => {
                    if let Some(s) = self.redirect(r) {
                        stdin = s;
                    }
                }
                Item::ProcessSubstitution(_, sub) => self.compound_list(&sub.list),
                Item::Word(w) => words.push((w.value.clone(), self.arg(&w.value))),
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push((name.value.clone(), self.arg(&name.value)));
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                Item::Word(w) => words.push((w.value.clone(), self.arg(&w.value))),
                Item::IoRedirect(r) => {
                    if let Some(s) = self.redirect(r) {
                        stdin = s;
                    }
                }
                Item::ProcessSubstitution(_, sub) => self.compound_list(&sub.list),
                // `export X=$(…)`, `dd of=$F`: the word as a whole (its expansions make it
                // dynamic); the builtin or command judges what it sets.
                Item::AssignmentWord(_, raw) => {
                    words.push((raw.value.clone(), self.arg(&raw.value)));
                }
            }
        }
        for name in &assignments {
            variables::judge_assignment(self, name);
        }
        let Some(((word, first), rest)) = words.split_first() else {
            return;
        };
        let args: Vec<Arg> = rest.iter().map(|(_, a)| a.clone()).collect();
        self.invoke_word(word, first, args, stdin);
    }

    /// Judges a command given by its first word.
    pub(super) fn invoke_word(&mut self, word: &str, first: &Arg, args: Vec<Arg>, stdin: Stdin) {
        let Some(value) = first.fixed() else {
            self.need_shell(format!(
                "running the command `{word}`, whose name is known only when the line runs"
            ));
            return;
        };
        let name = match self.command_name(value) {
            Some(n) => n,
            None => {
                self.need_shell(format!(
                    "running `{value}`, a program or script the gate cannot see into"
                ));
                return;
            }
        };
        let inv = Invocation { name, args, stdin };
        commands::judge(self, &inv);
    }

    /// The name a command word runs: itself when bare, the file name for a path into a
    /// system program directory; `None` for any other path (a script, a program of the
    /// user's).
    fn command_name(&self, value: &str) -> Option<String> {
        if !value.contains('/') {
            return Some(value.to_string());
        }
        const SYSTEM_BIN_DIRS: &[&str] = &[
            "/bin",
            "/sbin",
            "/usr/bin",
            "/usr/sbin",
            "/usr/local/bin",
            "/usr/local/sbin",
        ];
        let path = Path::new(value);
        let dir = path.parent()?.to_str()?;
        let name = path.file_name()?.to_str()?;
        SYSTEM_BIN_DIRS.contains(&dir).then(|| name.to_string())
    }

    /// An assignment's value is expanded now (its substitutions run); returns the name.
    fn assignment(&mut self, assignment: &ast::Assignment) -> String {
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => {
                self.arg(&w.value);
            }
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        self.arg(&k.value);
                    }
                    self.arg(&v.value);
                }
            }
        }
        match &assignment.name {
            ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
                n.clone()
            }
        }
    }

    /// Judges a redirect; returns the standard input it sets, if it is an input redirect.
    fn redirect(&mut self, r: &ast::IoRedirect) -> Option<Stdin> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        match r {
            R::File(fd, kind, target) => match (kind, target) {
                (K::Read, T::Filename(w)) => {
                    self.arg(&w.value);
                    (fd.unwrap_or(0) == 0).then_some(Stdin::File)
                }
                (K::Write | K::Clobber | K::ReadAndWrite, T::Filename(w)) => {
                    let target = self.arg(&w.value);
                    self.write_target(&target, "a redirect");
                    None
                }
                (K::Append, T::Filename(w)) => {
                    let target = self.arg(&w.value);
                    self.append_target(&target);
                    None
                }
                // `>&word`: a file descriptor, or (bash) a file for both outputs.
                (K::DuplicateOutput | K::DuplicateInput, T::Duplicate(w)) => {
                    let target = self.arg(&w.value);
                    let is_fd = target.fixed().is_some_and(|s| {
                        s == "-" || s.trim_end_matches('-').parse::<u32>().is_ok()
                    });
                    if !is_fd && matches!(kind, K::DuplicateOutput) {
                        self.write_target(&target, "a redirect");
                    }
                    None
                }
                (_, T::ProcessSubstitution(_, sub)) => {
                    self.compound_list(&sub.list);
                    None
                }
                (_, T::Filename(w)) | (_, T::Duplicate(w)) => {
                    self.arg(&w.value);
                    None
                }
                (_, T::Fd(_)) => None,
            },
            R::HereDocument(fd, doc) => {
                let text = if doc.requires_expansion {
                    self.heredoc_body(&doc.doc.value)
                } else {
                    Some(doc.doc.value.clone())
                };
                (fd.unwrap_or(0) == 0).then_some(Stdin::Text(text))
            }
            R::HereString(fd, w) => {
                let arg = self.arg(&w.value);
                (fd.unwrap_or(0) == 0).then_some(Stdin::Text(arg.fixed().map(str::to_string)))
            }
            R::OutputAndError(w, append) => {
                let target = self.arg(&w.value);
                if *append {
                    self.append_target(&target);
                } else {
                    self.write_target(&target, "a redirect");
                }
                None
            }
        }
    }

    /// An unquoted here-document's body: its substitutions run; its text when it holds none.
    fn heredoc_body(&mut self, body: &str) -> Option<String> {
        let Ok(pieces) = word::parse_heredoc(body, &ParserOptions::default()) else {
            self.need_shell("a here-document the gate cannot read");
            return None;
        };
        let mut out = String::new();
        let mut fixed = true;
        for p in &pieces {
            match &p.piece {
                WordPiece::Text(s) => out.push_str(s),
                WordPiece::EscapeSequence(s) => out.push_str(s.trim_start_matches('\\')),
                _ => {
                    fixed = false;
                    self.piece_substitutions(&p.piece, body, p);
                }
            }
        }
        fixed.then_some(out)
    }

    /// Judges a command line inside this one (a substitution, a `-c` string).
    pub(super) fn nested(&mut self, script: &str) {
        if self.depth >= MAX_SCRIPT_DEPTH {
            self.need_shell("command lines nested deeper than the gate reads");
            return;
        }
        match parse(script) {
            Ok(program) => {
                self.depth += 1;
                // A nested script's `cd` does not move the commands after it.
                let saved = self.cwd.clone();
                self.program(&program);
                self.cwd = saved;
                self.depth -= 1;
            }
            // `sh -c 'if'` is an error and runs nothing in a bash-family shell.
            Err(Failure::Incomplete) | Err(Failure::Syntax) => fallback_scan(self, script),
            Err(Failure::TooComplex(why)) => self.need_shell(why),
        }
    }
}

#[cfg(test)]
mod tests;
