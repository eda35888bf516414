// The java kernel of a code-interpreter context (src/interpreter/python/bridge-kernels.py's
// JavaKernel): runs inside a sandbox, launched as a single-file source program (`java
// JavaKernel.java CONTROL_FD CELLS_FD`), and evaluates cells with JShell's API (jdk.jshell) in
// this JVM (its "local" execution engine), so what a cell prints goes straight to this process's
// stdout and stderr, which the bridge streams.
//
// Cells come on the cells fd, each as length-prefixed strings (a line with the byte length, then
// the UTF-8 bytes): the cell's token, its code, the number of env vars, then each var's name and
// value. Reports go to the control fd as JSON lines, each with the cell's token: {"started"} once
// SIGINT stops the cell, then {"done", "result"?, "error"?}. The first line, before any cell, is
// {"ready": true}.
//
// Env vars: E2B's java kernel (IJava) gives them to cells as system properties
// (System.getProperty("FOO"), which is what E2B's tests read): the sandbox's environment is copied
// into the system properties at start (a property the JVM set keeps its value), and a run's vars
// are set as properties for that run and put back after it. A JVM cannot change its own
// environment, so System.getenv shows the sandbox's, not a run's.
//
// A cell's value is its last snippet's, when that is an expression, as JShell prints it (a string
// in quotes; E2B's faces of the host take them off). SIGINT while a cell runs stops it (JShell's
// stop(): the local engine stops the thread running the snippet) and ends it with a
// KeyboardInterrupt error, the name every kernel here gives an interrupted cell; between cells it
// is ignored.
import java.io.BufferedInputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;
import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.VarSnippet;
import sun.misc.Signal;

public final class JavaKernel {
    private final JShell shell;
    private final PrintStream control;
    private final InputStream cells;
    /** The running cell's token, while SIGINT is its to take; null between cells. */
    private volatile String running;
    private volatile boolean interrupted;

    private JavaKernel(PrintStream control, InputStream cells) {
        this.control = control;
        this.cells = cells;
        this.shell = JShell.builder().executionEngine("local").in(InputStream.nullInputStream()).out(System.out).err(System.err).build();
    }

    public static void main(String[] args) throws IOException {
        for (Map.Entry<String, String> entry : System.getenv().entrySet()) {
            if (System.getProperty(entry.getKey()) == null) System.setProperty(entry.getKey(), entry.getValue());
        }
        PrintStream control = new PrintStream(new FileOutputStream("/dev/fd/" + args[0]), true, StandardCharsets.UTF_8);
        // Buffered: a pipe's FileInputStream fails readNBytes (it seeks, JDK 17).
        InputStream cells = new BufferedInputStream(new FileInputStream("/dev/fd/" + args[1]));
        JavaKernel kernel = new JavaKernel(control, cells);
        Signal.handle(new Signal("INT"), signal -> kernel.interrupt());
        // The first snippet compiles slowly (javac's classes load): done before the kernel says it is up.
        kernel.shell.eval("0;");
        kernel.shell.drop(kernel.shell.snippets().reduce((first, second) -> second).orElseThrow());
        control.print("{\"ready\": true}\n");
        control.flush();
        kernel.serve();
    }

    /**
     * Stops the running cell. JShell's stop() stops a snippet that runs, and nothing while one
     * compiles (an interrupt that came right behind its cell), so it is sent until the cell ends,
     * from a thread of its own; the cell's snippets not yet run are not run.
     */
    private void interrupt() {
        String cell = running;
        if (cell == null || interrupted) return;
        interrupted = true;
        Thread stopper = new Thread(() -> {
            while (running == cell) {
                try {
                    shell.stop();
                    Thread.sleep(20);
                } catch (InterruptedException stopped) {
                    return;
                } catch (RuntimeException | Error notRunning) {
                    // Between snippets: there is nothing to stop yet.
                }
            }
        }, "agent-runner-interrupt");
        stopper.setDaemon(true);
        stopper.start();
    }

    private void serve() throws IOException {
        for (;;) {
            String token = readString();
            if (token == null) return;
            String code = readString();
            int count = Integer.parseInt(readString());
            Map<String, String> env = new LinkedHashMap<>();
            for (int i = 0; i < count; i++) env.put(readString(), readString());
            runCell(token, code == null ? "" : code, env);
        }
    }

    private void runCell(String token, String code, Map<String, String> env) {
        Map<String, String> old = new LinkedHashMap<>();
        for (Map.Entry<String, String> entry : env.entrySet()) {
            old.put(entry.getKey(), System.getProperty(entry.getKey()));
            System.setProperty(entry.getKey(), entry.getValue());
        }
        interrupted = false;
        running = token;
        report(token, "\"started\": true");
        String[] outcome;
        try {
            outcome = evaluate(code);
        } catch (RuntimeException error) {
            outcome = new String[] {null, errorJson(error.getClass().getName(), String.valueOf(error.getMessage()), stackTrace(error))};
        } finally {
            running = null;
        }
        if (interrupted && outcome[1] == null) outcome = new String[] {null, errorJson("KeyboardInterrupt", "the cell was interrupted", "")};
        for (Map.Entry<String, String> entry : old.entrySet()) {
            if (entry.getValue() == null) System.clearProperty(entry.getKey());
            else System.setProperty(entry.getKey(), entry.getValue());
        }
        System.out.flush();
        System.err.flush();
        StringBuilder done = new StringBuilder("\"done\": true");
        if (outcome[0] != null) done.append(", \"result\": ").append(quote(outcome[0]));
        if (outcome[1] != null) done.append(", \"error\": ").append(outcome[1]);
        report(token, done.toString());
    }

    /** The cell's snippets one by one: its value (the last snippet's, an expression's) and its error as JSON, either null. */
    private String[] evaluate(String code) {
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        String remaining = code;
        String value = null;
        while (!remaining.isBlank() && !interrupted) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(remaining);
            String source;
            switch (info.completeness()) {
                case EMPTY:
                    return new String[] {value, null};
                case COMPLETE:
                case COMPLETE_WITH_SEMI:
                case CONSIDERED_INCOMPLETE:
                    source = info.source() == null ? remaining : info.source();
                    remaining = info.remaining();
                    break;
                default:
                    // Incomplete or unknown: the whole rest, so its compile error is the cell's.
                    source = remaining;
                    remaining = "";
            }
            value = null;
            for (SnippetEvent event : shell.eval(source)) {
                if (event.causeSnippet() != null) continue;
                JShellException exception = event.exception();
                if (exception != null) return new String[] {null, exceptionJson(exception)};
                Snippet snippet = event.snippet();
                if (event.status() == Snippet.Status.REJECTED) return new String[] {null, compileErrorJson(snippet)};
                if (!event.status().isDefined()) {
                    String missing = shell.unresolvedDependencies((jdk.jshell.DeclarationSnippet) snippet).collect(Collectors.joining(", "));
                    return new String[] {null, errorJson("UnresolvedReferenceException", "cannot find symbol: " + missing, snippet.source())};
                }
                if (isExpression(snippet)) value = event.value();
            }
        }
        return new String[] {value, null};
    }

    private static boolean isExpression(Snippet snippet) {
        return snippet.kind() == Snippet.Kind.EXPRESSION
            || (snippet instanceof VarSnippet && snippet.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND);
    }

    private String exceptionJson(JShellException exception) {
        if (exception instanceof UnresolvedReferenceException) {
            var snippet = ((UnresolvedReferenceException) exception).getSnippet();
            String missing = shell.unresolvedDependencies(snippet).collect(Collectors.joining(", "));
            return errorJson("UnresolvedReferenceException", snippet.name() + " cannot be used until this is declared: " + missing, "");
        }
        String name = exception instanceof EvalException ? ((EvalException) exception).getExceptionClassName() : exception.getClass().getName();
        String message = exception.getMessage() == null ? "" : exception.getMessage();
        StringBuilder trace = new StringBuilder(name).append(message.isEmpty() ? "" : ": " + message).append('\n');
        for (StackTraceElement element : exception.getStackTrace()) {
            // The kernel's own frames (JShell's engine, this class) under the cell's are not the cell's.
            if (element.getClassName().startsWith("jdk.jshell.") || element.getClassName().startsWith("jdk.internal.")) break;
            trace.append("\tat ").append(element).append('\n');
        }
        return errorJson(name, message, trace.toString());
    }

    private String compileErrorJson(Snippet snippet) {
        StringBuilder messages = new StringBuilder();
        StringBuilder trace = new StringBuilder();
        shell.diagnostics(snippet).filter(Diag::isError).forEach(diag -> {
            String message = diag.getMessage(null);
            if (messages.length() > 0) messages.append('\n');
            messages.append(message);
            trace.append(message).append('\n').append(pointAt(snippet.source(), (int) diag.getStartPosition(), (int) diag.getEndPosition()));
        });
        return errorJson("CompilationException", messages.toString(), trace.toString());
    }

    /** The line of `source` where an error is, underlined from `start` to `end`. */
    private static String pointAt(String source, int start, int end) {
        if (start < 0 || start > source.length()) return "";
        int lineStart = source.lastIndexOf('\n', Math.max(0, start - 1)) + 1;
        int lineEnd = source.indexOf('\n', start);
        if (lineEnd < 0) lineEnd = source.length();
        int stop = Math.max(start + 1, Math.min(end, lineEnd));
        return source.substring(lineStart, lineEnd) + "\n" + " ".repeat(start - lineStart) + "^".repeat(Math.max(1, stop - start)) + "\n";
    }

    private static String stackTrace(Throwable error) {
        StringWriter writer = new StringWriter();
        error.printStackTrace(new java.io.PrintWriter(writer));
        return writer.toString();
    }

    private static String errorJson(String name, String value, String traceback) {
        return "{\"name\": " + quote(name) + ", \"value\": " + quote(value) + ", \"traceback\": " + quote(traceback) + "}";
    }

    private void report(String token, String fields) {
        // A newline first: a cell may have left half a line on the control fd.
        control.print("\n{" + fields + ", \"cell\": " + quote(token) + "}\n");
        control.flush();
    }

    /** One length-prefixed string of the cells fd; null at its end. */
    private String readString() throws IOException {
        int length = 0;
        boolean digits = false;
        for (;;) {
            int next = cells.read();
            if (next < 0) return null;
            if (next == '\n') break;
            if (next < '0' || next > '9') throw new IOException("a cell out of protocol");
            length = length * 10 + (next - '0');
            digits = true;
        }
        if (!digits) throw new IOException("a cell out of protocol");
        byte[] bytes = cells.readNBytes(length);
        if (bytes.length < length) return null;
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
