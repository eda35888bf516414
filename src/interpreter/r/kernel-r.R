# The r kernel of a code-interpreter context (src/interpreter/python/bridge-kernels.py's RKernel):
# runs inside a sandbox as `R --no-echo --no-restore --no-save -f kernel-r.R --args CONTROL CELLS`.
# Cells come on the CELLS fd as length-prefixed strings (a line with the byte length, then the
# UTF-8 bytes): the cell's token, its code, the number of env vars, then each var's name and value.
# Reports go to the CONTROL fd as JSON lines with the cell's token: {"started"}, then {"done",
# "result"?, "error"?}; the first line, before any cell, is {"ready": true}.
#
# A cell's top-level expressions run in turn in the global environment; the last one's value, when
# visible, is the result as R prints it (`[1] "x"`), earlier visible values are printed as R
# prints them at its prompt. A run's env vars are set with Sys.setenv for that run and put back
# after it. SIGINT while a cell runs stops it (R's interrupt condition): a KeyboardInterrupt error,
# the name every kernel here gives an interrupted cell; the state stays.

args <- commandArgs(trailingOnly = TRUE)
control <- file(paste0("/dev/fd/", args[[1]]), open = "wb", raw = TRUE)
cells <- file(paste0("/dev/fd/", args[[2]]), open = "rb", raw = TRUE)

json_string <- function(text) {
  text <- enc2utf8(paste(text, collapse = "\n"))
  text <- gsub("\\", "\\\\", text, fixed = TRUE)
  text <- gsub("\"", "\\\"", text, fixed = TRUE)
  text <- gsub("\n", "\\n", text, fixed = TRUE)
  text <- gsub("\r", "\\r", text, fixed = TRUE)
  text <- gsub("\t", "\\t", text, fixed = TRUE)
  # Other control characters as \u00XX.
  codes <- utf8ToInt(text)
  if (any(codes < 32L, na.rm = TRUE)) {
    pieces <- vapply(codes, function(code) if (code < 32L) sprintf("\\u%04x", code) else intToUtf8(code), "")
    text <- paste(pieces, collapse = "")
  }
  paste0("\"", text, "\"")
}

report <- function(token, fields) {
  # A newline first: a cell may have left half a line on the control fd.
  writeBin(charToRaw(enc2utf8(paste0("\n{", fields, ", \"cell\": ", json_string(token), "}\n"))), control)
  flush(control)
}

error_json <- function(name, value, traceback) {
  paste0("{\"name\": ", json_string(name), ", \"value\": ", json_string(value), ", \"traceback\": ", json_string(traceback), "}")
}

# One length-prefixed string of the cells fd; NULL at its end.
read_string <- function() {
  digits <- raw(0)
  repeat {
    byte <- readBin(cells, "raw", 1L)
    if (length(byte) == 0L) return(NULL)
    if (byte == as.raw(10L)) break
    digits <- c(digits, byte)
  }
  length <- as.integer(rawToChar(digits))
  if (length == 0L) return("")
  bytes <- readBin(cells, "raw", length)
  if (length(bytes) < length) return(NULL)
  text <- rawToChar(bytes)
  Encoding(text) <- "UTF-8"
  text
}

# " in f(x)" for a condition's call; nothing for a cell's top level (the kernel's own eval).
call_of <- function(condition) {
  call <- conditionCall(condition)
  if (is.null(call)) return("")
  text <- paste(deparse(call), collapse = " ")
  if (startsWith(text, "eval(expressions[[index]]")) "" else paste0(" in ", text)
}

shown <- function(value) paste(utils::capture.output(print(value)), collapse = "\n")

run_cell <- function(code) {
  expressions <- tryCatch(parse(text = code, keep.source = FALSE), error = function(error) error)
  if (inherits(expressions, "error")) {
    message <- conditionMessage(expressions)
    return(list(error = error_json("SyntaxError", message, message)))
  }
  result <- NULL
  count <- length(expressions)
  for (index in seq_len(count)) {
    outcome <- withCallingHandlers(
      withVisible(eval(expressions[[index]], envir = globalenv())),
      warning = function(warning) {
        cat("Warning message", call_of(warning), ":\n", conditionMessage(warning), "\n", sep = "", file = stderr())
        invokeRestart("muffleWarning")
      }
    )
    if (outcome$visible) {
      if (index == count) {
        result <- shown(outcome$value)
      } else {
        print(outcome$value)
      }
    }
  }
  list(result = result)
}

serve_cell <- function(token, code, env) {
  old <- Sys.getenv(names(env), unset = NA, names = TRUE)
  if (length(env) > 0L) do.call(Sys.setenv, as.list(env))
  report(token, "\"started\": true")
  outcome <- tryCatch(
    run_cell(code),
    interrupt = function(condition) list(error = error_json("KeyboardInterrupt", "the cell was interrupted", "")),
    error = function(error) {
      list(error = error_json("Error", conditionMessage(error), paste0("Error", call_of(error), ": ", conditionMessage(error))))
    }
  )
  for (name in names(old)) {
    if (is.na(old[[name]])) Sys.unsetenv(name) else do.call(Sys.setenv, stats::setNames(list(old[[name]]), name))
  }
  flush(stdout())
  flush(stderr())
  fields <- "\"done\": true"
  if (!is.null(outcome$result)) fields <- paste0(fields, ", \"result\": ", json_string(outcome$result))
  if (!is.null(outcome$error)) fields <- paste0(fields, ", \"error\": ", outcome$error)
  report(token, fields)
}

writeBin(charToRaw("{\"ready\": true}\n"), control)
flush(control)
repeat {
  # An interrupt that lands between cells (after a cell's end was reported) is dropped here.
  served <- tryCatch({
    token <- read_string()
    if (is.null(token)) FALSE else {
      code <- read_string()
      count <- as.integer(read_string())
      env <- character(0)
      for (index in seq_len(count)) {
        name <- read_string()
        env[[name]] <- read_string()
      }
      serve_cell(token, code, env)
      TRUE
    }
  }, interrupt = function(condition) TRUE)
  if (!served) break
}
