//! `grid-wrapper`: flags → configuration → [`grid_wrapper::app::run`] → exit code.
//! Exit codes: 0 for `--help`/`--version`, 2 for invalid flags, 1 for any other fatal error.

use std::process::ExitCode;

use grid_wrapper::config::{self, Command};

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cfg = match config::parse_args(args) {
        Ok(Command::Run(cfg)) => cfg,
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
    if let Err(e) = simple_logger::SimpleLogger::new()
        .with_level(level)
        .with_module_level("ureq", log::LevelFilter::Warn)
        .with_module_level("rustls", log::LevelFilter::Warn)
        .init()
    {
        eprintln!("grid-wrapper: cannot start logging: {e}");
    }
    match grid_wrapper::app::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            eprintln!("grid-wrapper: {e}");
            ExitCode::from(1)
        }
    }
}
