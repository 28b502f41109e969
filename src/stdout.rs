//! Output on stdout that may be piped into a reader that stops early (`config-schema | head`).
//! A reader that closed the pipe has read all it wants, so a closed pipe ends the output
//! quietly; `println!` would panic with a backtrace instead.

use std::fmt;
use std::io::{self, Write};

/// Writes `text` to stdout; a closed pipe is a clean end, not an error. Other failures (a
/// full disk behind a redirect) are errors, so commands whose output is their product fail.
pub fn write(text: fmt::Arguments) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_fmt(text).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes a line that informs rather than being the command's product: a failure to write
/// it is said on stderr and the command goes on with its work.
pub fn say(text: fmt::Arguments) {
    if let Err(e) = write(text) {
        eprintln!("error: writing to stdout: {e}");
    }
}

/// `println!` that ends quietly on a closed pipe (see [`say`]).
macro_rules! outln {
    () => {
        $crate::stdout::say(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::say(format_args!("{}\n", format_args!($($arg)*)))
    };
}
