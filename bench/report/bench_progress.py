"""bench_progress.py — the live progress line of rckpt_bench.py on a terminal.

While a suite runs, one line is redrawn in place every second and at each
line a tool prints:

    rckpt bench: suite 4/9 frontier, 47 s: frontier: frontier: eps 0.0012: rckpt 8.7x +0.12%, ...

(the suite, its elapsed seconds, the tool running and the last line that
tool printed, cut to the terminal's width). Messages printed meanwhile
(say()) go above it; when the suite ends the line is replaced by the
suite's status. Off (every call a no-op) when the stream is not a terminal.
"""
import shutil
import threading
import time


class Progress:
    def __init__(self, stream, enabled):
        self.stream = stream
        self.on = bool(enabled)
        self.lock = threading.Lock()
        self.head = None      # "suite i/N name"; None: no suite running
        self.t0 = 0.0
        self.what = ""        # the tool, and what it last printed
        self.shown = False
        self.stop_ev = None
        self.thread = None

    def start(self, i, n, suite):
        if not self.on:
            return
        with self.lock:
            self.head = "suite %d/%d %s" % (i, n, suite)
            self.t0 = time.time()
            self.what = "starting"
            self.draw()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self.tick, args=(self.stop_ev,), daemon=True)
        self.thread.start()

    def tick(self, ev):
        while not ev.wait(1.0):
            with self.lock:
                self.draw()

    def note(self, tool, line=None):
        """The tool now running, and (line) the last line it printed."""
        if not self.on:
            return
        line = (line or "").strip()
        with self.lock:
            self.what = "%s: %s" % (tool, line) if line else tool
            self.draw()

    def line(self):
        return "rckpt bench: %s, %.0f s: %s" % (self.head, time.time() - self.t0, self.what)

    def draw(self):
        if self.head is None:
            return
        width = shutil.get_terminal_size((100, 24)).columns
        text = self.line().replace("\r", " ").replace("\t", " ")
        if len(text) > width - 1:
            text = text[:max(0, width - 4)] + "..."
        self.stream.write("\r\033[K" + text)
        self.stream.flush()
        self.shown = True

    def clear(self):
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False

    def message(self, write):
        """Runs write() (which prints whole lines) with the progress line
        out of the way, and draws it again below."""
        if not self.on:
            write()
            return
        with self.lock:
            self.clear()
            write()
            self.draw()

    def end(self, final):
        """The suite is over: its line becomes final (a whole line)."""
        if not self.on:
            return
        if self.stop_ev:
            self.stop_ev.set()
            self.thread.join()
        with self.lock:
            self.clear()
            self.head = None
            self.stream.write(final + "\n")
            self.stream.flush()
