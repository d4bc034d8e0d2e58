# interactive_test.rb: -i at a terminal (a pty, typed into as a person would) and from a pipe.
require_relative 'helper'
require 'io/console'
require 'pty'

class InteractiveTest < Minitest::Test
  include TracerTest

  # tracer -i on a pty of its own: what the screen shows ("\r\n" as "\n"), and the keys typed.
  class Terminal
    attr_reader :pid

    def initialize(*args, home:)
      env = { 'TERM' => 'xterm', 'HOME' => home, 'LANG' => 'C.UTF-8' }
      @r, @w, @pid = PTY.spawn(env, TRACER, *args.map(&:to_s))
      @r.winsize = [40, 160]
      @screen = +''
      @lock = Mutex.new
      @reader = Thread.new do
        loop { (chunk = @r.readpartial(4096)) && @lock.synchronize { @screen << chunk } }
      rescue EOFError, Errno::EIO, IOError
        nil # the client has exited and the pty closed
      end
    end

    def screen = @lock.synchronize { @screen.gsub("\r\n", "\n") }

    def type(keys) = @w.write(keys)

    # Waits until the screen shows re, count times; returns the screen.
    def wait_for(re, count: 1, within: WAIT)
      deadline = Time.now + within
      sleep 0.01 until screen.scan(re).size >= count || Time.now > deadline
      screen.scan(re).size >= count or raise "no #{re.inspect} (x#{count}) on the screen:\n#{screen}"
      screen
    end

    # Its Process::Status, once it exits.
    def finish(within: WAIT)
      deadline = Time.now + within
      until (done = Process.wait2(@pid, Process::WNOHANG))
        raise "tracer -i did not exit:\n#{screen}" if Time.now > deadline

        sleep 0.01
      end
      @reader.join(within)
      done[1]
    end

    def kill
      Process.kill('KILL', @pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  def setup
    super
    @terminals = []
    @home = Dir.mktmpdir
  end

  def teardown
    @terminals.each(&:kill)
    super
    FileUtils.rm_rf(@home)
  end

  def terminal(*args)
    Terminal.new(*args, home: @home).tap { |t| @terminals << t }
  end

  def prompt(pid) = /^tracer #{pid}> /

  # The session a person has: a definition over several lines, locals kept from line to line,
  # an exception that leaves them at the prompt, a line recalled with the up arrow, a line
  # abandoned, a running one interrupted, and Ctrl+D to leave.
  def test_a_session_at_the_terminal
    t = target('sleep')
    term = terminal('-p', t.pid, '-i')
    term.wait_for(prompt(t.pid))
    assert_match(/\*\*\* attached to process #{t.pid} \(Ruby #{Regexp.escape(RUBY_VERSION)}\); exit or Ctrl\+D detaches/, term.screen)

    term.type("x = 6\r")
    term.wait_for(/^=> 6$/)
    term.type("def sq(n)\r")
    term.wait_for(/^tracer #{t.pid}\* /)
    term.type("  n * n\r")
    term.wait_for(/^tracer #{t.pid}\* /, count: 2)
    term.type("end\r")
    term.wait_for(/^=> :sq$/)
    term.type("sq(x) + 6\r")
    term.wait_for(/^=> 42$/)

    term.type("raise KeyError, 'no such key'\r")
    term.wait_for(/^KeyError: no such key$/)
    term.type("[x, 7].sum\r")
    term.wait_for(/^=> 13$/)
    term.type("\e[A\r") # up arrow: the line before, again
    term.wait_for(/^=> 13$/, count: 2)

    # Ctrl+C drops what was typed: the next line runs alone.
    term.type('this is not Ruby (')
    term.wait_for(/this is not Ruby \(/)
    term.type("\x03")
    term.wait_for(/\^C\n#{prompt(t.pid)}/)
    term.type("1 + 1\r")
    term.wait_for(/^=> 2$/)

    # Ctrl+C while a line runs: the line raises Interrupt in the process, the prompt is back.
    term.type("$stdout.puts('napping'); sleep 60\r")
    t.wait_for(/napping/)
    term.type("\x03")
    term.wait_for(/Interrupt: interrupted by tracer$/)
    term.type("x\r")
    term.wait_for(/^=> 6$/, count: 2)

    term.type("\x04")
    term.wait_for(/\*\*\* detached from process #{t.pid}$/)
    assert_equal 0, term.finish.exitstatus
    screen = term.screen
    refute_match(/tracer: /, screen)

    # The process goes on, with no session, no eval thread left, and none of the session's locals.
    assert t.alive?
    # values_at, not slice: Ruby 3.4 inspects a Hash as {client_pid: 1} where 3.3 wrote {:client_pid=>1}.
    out, err, status = tracer('-p', t.pid, '-e', '[TracerAgent.stats[:last_session].values_at(:client_pid, :ended), ' \
                                                 'Thread.list.count { |th| th.name == "tracer-eval" }, defined?(x)]')
    assert status.success?, err
    assert_equal "=> [[#{term.pid}, :detached], 1, nil]\n", out

    history = File.join(@home, '.tracer_history')
    assert_equal 0o600, File.stat(history).mode & 0o777
    text = File.read(history)
    ['x = 6', 'def sq(n)', 'end', '[x, 7].sum'].each { |l| assert_includes text, l.gsub(' ', '\\\\040'), text }
    refute_includes text, 'this\\040is\\040not'
  end

  # What was typed in one session is there, with the up arrow, in the next.
  def test_history_outlives_the_session
    t = target('sleep')
    first = terminal('-p', t.pid, '-i')
    first.wait_for(prompt(t.pid))
    first.type("6 * 7\r")
    first.wait_for(/^=> 42$/)
    first.type("exit\r")
    assert_equal 0, first.finish.exitstatus

    second = terminal('-p', t.pid, '-i')
    second.wait_for(prompt(t.pid))
    second.type("\e[A\e[A") # exit, then the line before it
    second.wait_for(/6 \* 7/)
    second.type("\r")
    second.wait_for(/^=> 42$/)
    second.type("exit\r")
    assert_equal 0, second.finish.exitstatus
  end

  # The process exits while its prompt is up: said on a line of its own, exit code 3.
  def test_the_process_exits_under_the_prompt
    t = target('sleep')
    term = terminal('-p', t.pid, '-i')
    term.wait_for(prompt(t.pid))
    t.kill('TERM')
    term.wait_for(/\n\*\*\* process #{t.pid} exited$/)
    assert_equal 3, term.finish.exitstatus
  end

  # Lines from a pipe: no prompt, no editing; values on stdout, exceptions on stderr, each
  # session with locals of its own, never the app's top level.
  def test_lines_from_a_pipe
    t = target('sleep')
    script = <<~RUBY
      x = 6
      def sq(n)
        n * n
      end

      raise ArgumentError, "bad"
      [sq(x),
       x]
      exit
      $stdout.puts 'never run'
    RUBY
    out, err, status = Open3.capture3(TRACER, '-p', t.pid.to_s, '-i', stdin_data: script)
    assert status.success?, err
    assert_equal "=> 6\n=> :sq\n=> [36, 6]\n", out
    assert_equal "*** attached to process #{t.pid} (Ruby #{RUBY_VERSION}); exit or Ctrl+D detaches\n" \
                 "ArgumentError: bad\n*** detached from process #{t.pid}\n", err
    refute_match(/never run/, t.out)

    out, = Open3.capture3(TRACER, '-p', t.pid.to_s, '-i', stdin_data: "defined?(x)\n")
    assert_equal "=> nil\n", out
    assert_equal "=> nil\n", tracer('-p', t.pid, '-e', 'defined?(x)').first
  end

  def test_one_process_at_a_time_on_the_terminal
    t = target('sleep')
    u = target('sleep')
    _, err, status = tracer('-p', t.pid, '-p', u.pid, '-i')
    assert_equal 2, status.exitstatus
    assert_match(/-i takes one process, and you gave 2/, err)
    _, err, status = tracer('-p', t.pid, '-i', '-o', '/dev/null')
    assert_equal 2, status.exitstatus
    assert_match(/-i answers on the terminal: it excludes --output/, err)
  end

  # A message carries at most 64 MiB (TRC_MAX_MESSAGE): longer code is refused here, and the
  # session goes on.
  def test_code_over_the_message_limit_is_not_sent
    t = target('sleep')
    lines = "\"#{'x' * (65 << 20)}\".size\n1 + 1\n"
    out, err, status = Open3.capture3(TRACER, '-p', t.pid.to_s, '-i', stdin_data: lines)
    assert status.success?, err
    assert_equal "=> 2\n", out
    assert_match(/^tracer: this code is over 64 MiB, the most one message carries: not run$/, err)
  end
end
