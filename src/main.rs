//! `grid-wrapper`: flags → configuration → [`grid_wrapper::app::run`] → exit code.
//! `grid-wrapper check [flags]` runs [`grid_wrapper::preflight`] instead and prints its report.
//! Exit codes: 0 for `--help`/`--version` (and a ready `check`), 2 for invalid flags, 1 for any
//! other fatal error (and a `check` that found problems).

use std::io::Write;
use std::process::ExitCode;

use grid_wrapper::config::{self, Command, OutputFormat};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cfg = match config::parse_args(args) {
        Ok(Command::Run(cfg)) => cfg,
        Ok(Command::Check(cfg, format)) => return check(&cfg, format),
        Ok(Command::Help) => {
            print!("{}", config::help_text());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("grid-wrapper {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("grid-wrapper: {e}");
            eprintln!("Run 'grid-wrapper --help' for usage.");
            return ExitCode::from(2);
        }
    };
    let level = match cfg.verbosity {
        0..=1 => log::LevelFilter::Info,
        2..=5 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    init_logging(level, level);
    match grid_wrapper::app::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            eprintln!("grid-wrapper: {e}");
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr at `level`, the EndpointSlice discovery module at `discovery`.
fn init_logging(level: log::LevelFilter, discovery: log::LevelFilter) {
    if let Err(e) = simple_logger::SimpleLogger::new()
        .with_level(level)
        .with_module_level("ureq", log::LevelFilter::Warn)
        .with_module_level("rustls", log::LevelFilter::Warn)
        .with_module_level("grid_wrapper::upstream::discovery", discovery)
        .init()
    {
        eprintln!("grid-wrapper: cannot start logging: {e}");
    }
}

/// `grid-wrapper check`: the report on stdout; exit 0 when ready, 1 otherwise. The report says
/// everything: the log (stderr) shows only warnings (e.g. an unreadable token file), or debug
/// lines with `-v 2` and up. Discovery's fallback messages speak of a running server, so they
/// are kept to debug.
fn check(cfg: &config::Config, format: OutputFormat) -> ExitCode {
    let level = match cfg.verbosity {
        0..=1 => log::LevelFilter::Warn,
        _ => log::LevelFilter::Debug,
    };
    let discovery = match cfg.verbosity {
        0..=1 => log::LevelFilter::Off,
        _ => log::LevelFilter::Debug,
    };
    init_logging(level, discovery);
    let (text, ready) = grid_wrapper::preflight::run(cfg, format);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        eprintln!("grid-wrapper: cannot write the report: {e}");
        return ExitCode::from(1);
    }
    if ready {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
