fn main() -> std::process::ExitCode {
    broadsheet::cli::main()
}
