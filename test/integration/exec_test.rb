# exec_test.rb: tracer --exec: programs started with the agent preloaded and traced from their
# first line (a script, rake, bundle exec, a program that forks), their exit status, --wait.
require_relative 'helper'
require 'rbconfig'

class ExecTest < Minitest::Test
  include TracerTest

  def setup
    super
    @dir = Dir.mktmpdir('tracer-exec')
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  # The agent the program loads is the one under test (make check-memory: its ASan build).
  def exec_tracer(*args, **opts)
    tracer(*args, env: { 'TRACER_AGENT_LIB' => File.expand_path(AGENT_LIB) }, **opts)
  end

  def script(name, text)
    File.join(@dir, name).tap { |path| File.write(path, text) }
  end

  def test_a_script_is_traced_from_its_first_line_and_its_status_is_tracers
    s = script('first.rb', <<~RUBY)
      def work(n) = n * 2
      work(1)
      3.times { |i| work(i + 2) }
      puts "done"
      exit 7
    RUBY
    out, err, status = exec_tracer('-m', 'Object#work(n)', '-x', RUBY, s)
    assert_equal 7, status.exitstatus, err
    calls = out.scan(/^Object#work\(n=(\d+)\) <\d+\.\d{9}>$/).flatten
    assert_equal %w[1 2 3 4], calls, out
    assert_includes out, "done\n"
    assert_match(/\*\*\* attached to process (\d+)\n.*\*\*\* process \1 exited with status 7\n\z/m, err)
    refute_match(/matched no method/, err) # defined after the start: no warning
  end

  def test_exit_statuses_and_signals_are_the_programs
    ok = script('ok.rb', "sleep 0.01\n")
    _, err, status = exec_tracer('-m', 'Kernel#sleep', '-x', RUBY, ok)
    assert_equal 0, status.exitstatus, err
    killed = script('killed.rb', "Process.kill(:TERM, Process.pid)\nsleep\n")
    _, err, status = exec_tracer('-m', 'Kernel#sleep', '-x', RUBY, killed)
    assert_equal 128 + Signal.list['TERM'], status.exitstatus, err
    assert_match(/process \d+ killed by signal 15/, err)
  end

  def test_sigterm_to_tracer_reaches_the_program
    s = script('wait.rb', "puts :ready\n$stdout.flush\nsleep\n")
    c = client('-m', 'Kernel#sleep', '-x', RUBY, s)
    c.wait_for(/^ready$/) # the program starts traced
    c.signal('TERM')
    assert_equal 128 + Signal.list['TERM'], c.finish.exitstatus, c.err
    assert_match(/EXCEPTION SignalException: SIGTERM/, c.out)
  end

  # A SIGINT sent to tracer alone (kill -INT; Ctrl-C reaches the program by itself) is passed
  # on, as SIGTERM is: one ends the run.
  def test_sigint_to_tracer_alone_reaches_the_program
    s = script('wait.rb', "puts \"ready \#{$$}\"\n$stdout.flush\nloop { sleep 0.05 }\n")
    c = client('-m', 'Kernel#sleep', '-x', RUBY, s)
    # A sleep traced whole: the program is in its loop, nearly all of it inside a traced sleep,
    # where the Interrupt must be raised (not between the puts and the first sleep).
    c.wait_for(/^Kernel#sleep </)
    c.signal('INT')
    status = begin
      c.finish
    rescue RuntimeError => e
      # A program that goes on sleeping: whether it had the signal pending, blocked or ignored
      # (as in a run started with SIGINT ignored, before helper.rb put it back), or Ruby took it
      # and no Interrupt came.
      pid = c.out[/^ready (\d+)$/, 1]
      sig = (File.read("/proc/#{pid}/status").lines.grep(/^(Sig|ShdPnd)/).join if pid) rescue 'gone' # rubocop:disable Style/RescueModifier
      raise "#{e.message[0, 1500]}\n... the program's signals, after:\n#{sig}"
    end
    assert_equal 128 + Signal.list['INT'], status.exitstatus, c.err
    assert_match(/EXCEPTION Interrupt/, c.out)
  end

  # The program writes to the same pipe (or terminal) as the trace: none of its bytes lands
  # inside a trace line, not even one left open while the call runs.
  def test_program_output_never_lands_inside_a_trace_line
    go = File.join(@dir, 'go')
    s = script('inside.rb', <<~RUBY)
      def work(x)
        sleep 0.01 until File.exist?(#{go.inspect})
        $stdout.write("inside\\n")
        $stdout.flush
      end
      work(1)
    RUBY
    c = client('-m', 'Object#work(x)', '-x', RUBY, s)
    c.wait_for(/attached to process/, stream: :err)
    # The previous client wrote "Object#work(x=1" while the call ran, to finish the line at its
    # return: let it (a bounded wait, which the checks below do not depend on).
    begin
      c.wait_for(/Object#work\(x=1/, within: 2, stream: :out)
    rescue RuntimeError
      nil
    end
    File.write(go, '')
    assert c.finish.success?, c.err
    assert_includes c.out.lines, "inside\n", c.out
    assert_equal c.out.lines.grep(/Object#work/), c.out.lines.grep(/\AObject#work\(x=1\) <\d+\.\d+>\n\z/), c.out
  end

  # -x takes every word after it: one of tracer's own options there is said.
  def test_tracer_options_after_x_are_said
    s = script('args.rb', "p ARGV\n")
    out, err, status = exec_tracer('-m', 'Kernel#p', '-x', RUBY, s, '--duration', '1')
    assert status.success?, err
    assert_includes out, %(["--duration", "1"]\n)
    assert_match(/^tracer: '--duration' after --exec is the command's, not tracer's \(tracer's options go before --exec\)$/, err)
    _, err, status = exec_tracer('-m', 'Kernel#p', '-x', RUBY, s, '-w', 'x')
    assert status.success?, err
    refute_match(/after --exec/, err, 'words that are no option of tracer are not said')
  end

  def test_commands_that_cannot_be_run_or_traced
    _, err, status = exec_tracer('-m', 'x', '-x', 'tracer-no-such-command')
    assert_equal 127, status.exitstatus
    assert_match(/cannot run 'tracer-no-such-command': No such file or directory/, err)
    _, err, status = exec_tracer('-m', 'x', '-x', __FILE__) # not executable
    assert_equal 126, status.exitstatus
    assert_match(/Permission denied/, err)
    # Not Ruby: its status is kept, and tracer says it never connected (1 when it succeeded).
    _, err, status = exec_tracer('-m', 'x', '-x', 'sh', '-c', 'exit 4')
    assert_equal 4, status.exitstatus
    _, err, status = exec_tracer('-m', 'x', '-x', 'true')
    assert_equal 1, status.exitstatus
    assert_match(/process \d+ never connected: is it a Ruby program/, err)
  end

  def test_usage_errors
    [[%w[-m x -x], /option '-x' needs a command/],
     [%w[-m x --exec], /option '--exec' needs a command/],
     [%w[-m x --wait 1 -p 1], /--wait goes with --exec/],
     [%w[-m x -p 1 -x true], /--exec traces the program it starts: it excludes -p and --ps/],
     [%w[-e 1 -x true], /--exec traces .* -e, -i, --heapdump, .* and --fork go with -p or --ps/],
     [%w[--memory -x true], /--exec traces .* go with -p or --ps/],
     [%w[-x true], /nothing to do/]].each do |args, message|
      _, err, status = exec_tracer(*args)
      assert_equal 2, status.exitstatus, "#{args.join(' ')}: #{err}"
      assert_match message, err, args.join(' ')
    end
  end

  # Everything after -x is the command's, its options included.
  def test_the_commands_arguments_are_its_own
    s = script('args.rb', "def show(a) = a\nshow(ARGV)\n")
    out, err, status = exec_tracer('-m', 'Object#show(a)', '-x', RUBY, s, '-m', '--wait', 'x y')
    assert status.success?, err
    assert_includes out, 'Object#show(a=["-m", "--wait", "x y"])'
  end

  # The agent attaches after SECS, the usual way: what ran before is not traced. 2 s is ample
  # for Ruby to start and call early on a loaded machine (0.3 s was not, once); the program
  # says whether it did, so that a slower start fails as what it is.
  def test_wait_attaches_later
    s = script('later.rb', <<~RUBY)
      def early = 1
      def late = 2
      wrapped = -> { method(:late).owner.is_a?(TracerAgent::Wrappers) }
      early
      $stderr.puts "early ran before the attach: \#{!wrapped.call}"
      # Until tracer has attached and wrapped late (its owner says so).
      sleep 0.01 until wrapped.call
      late
      exit 5
    RUBY
    out, err, status = exec_tracer('-m', 'Object#early', 'Object#late', '--wait', '2', '-x', RUBY, s)
    assert_equal 5, status.exitstatus, err
    assert_includes err, 'early ran before the attach: true'
    assert_match(/^Object#late <\d+\.\d+>$/, out)
    refute_match(/early/, out)
  end

  def test_wait_longer_than_the_program_is_said
    s = script('short.rb', "exit 0\n")
    _, err, status = exec_tracer('-m', 'x', '--wait', '5', '-x', RUBY, s, within: 4)
    assert_equal 0, status.exitstatus, err
    assert_match(/ended before --wait ran out: not traced/, err)
  end

  # Debian's rake: the command itself when its #! names the Ruby under test, else through it.
  def rake
    shebang = File.open('/usr/bin/rake', &:gets).to_s[/\A#!\s*(\S+)/, 1]
    same = shebang && File.realpath(shebang) == File.realpath(RUBY) rescue false # rubocop:disable Style/RescueModifier
    same ? ['rake'] : [RUBY, '-S', 'rake']
  end

  def test_rake
    File.write(File.join(@dir, 'Rakefile'), <<~RUBY)
      def price(item) = item.size
      task(:report) { %w[apple fig].each { |i| price(i) } }
      task default: :report
    RUBY
    out, err, status = exec_tracer('-m', 'Object#price(item)', '-x', *rake, '-f', File.join(@dir, 'Rakefile'), 'report')
    assert status.success?, err
    assert_match(/\AObject#price\(item="apple"\) <[\d.]+>\nObject#price\(item="fig"\) <[\d.]+>\n\z/, out)
  end

  # bundle exec execs the program (same pid): it connects again, and is traced on.
  def test_bundle_exec
    File.write(File.join(@dir, 'Gemfile'), "# no gems\n")
    s = script('app.rb', "def work = :bundled\nwork\nputs defined?(Bundler) ? 'with bundler' : 'without'\n")
    env = { 'BUNDLE_GEMFILE' => File.join(@dir, 'Gemfile'), 'BUNDLE_APP_CONFIG' => File.join(@dir, '.bundle'),
            'HOME' => @dir }
    out, err, status = tracer('-m', 'Object#work', '-x', RUBY, '-S', 'bundle', 'exec', RUBY, s,
                              env: env.merge('TRACER_AGENT_LIB' => File.expand_path(AGENT_LIB)))
    assert status.success?, err
    assert_match(/^Object#work <[\d.]+>$/, out)
    assert_includes out, "with bundler\n"
    pid = err[/attached to process (\d+)/, 1]
    assert_equal 2, err.scan(/attached to process #{pid}\n/).size, err # bundle, then the program
  end

  # Forks, and the Ruby programs it spawns, are traced too: their lines say their pid.
  def test_a_program_that_forks_and_spawns
    s = script('forks.rb', <<~RUBY)
      def work(n) = n
      work(1)
      pid = fork { work(2) }
      Process.wait(pid)
      system(#{RUBY.inspect}, '-e', 'def work(n) = n; work(3)')
      work(4)
      exit 3
    RUBY
    out, err, status = exec_tracer('-m', 'Object#work(n)', '-x', RUBY, s)
    assert_equal 3, status.exitstatus, err
    main = err[/attached to process (\d+)/, 1]
    children = err.scan(/attached to process (\d+)/).flatten - [main]
    assert_equal 2, children.uniq.size, err
    assert_match(/^Object#work\(n=1\) </, out)
    assert_match(/^Object#work\(n=4\) </, out)
    assert_match(/^\[#{children[0]}\] Object#work\(n=2\) </, out)
    assert_match(/^\[#{children[1]}\] Object#work\(n=3\) </, out)
    assert_match(/process #{main} exited with status 3\n\z/, err)
  end

  # A child the program leaves running is detached when the program ends: tracer ends too.
  def test_a_child_left_running_is_detached
    s = script('orphan.rb', <<~RUBY)
      def work = 1
      r, w = IO.pipe
      fork do
        r.close
        $stdout.reopen(File::NULL) # the test reads tracer's output to its end
        $stderr.reopen(File::NULL)
        work
        w.puts :up
        w.close
        sleep 30
      end
      w.close
      r.gets
      exit 0
    RUBY
    out, err, status = exec_tracer('-m', 'Object#work', '-x', RUBY, s, within: 15)
    assert status.success?, err
    child = out[/^\[(\d+)\] Object#work/, 1] or flunk "no child line: #{out}"
    assert_match(/detached from process #{child}/, err)
    Process.kill('KILL', Integer(child)) rescue nil # rubocop:disable Style/RescueModifier
  end

  def test_top_counts_from_the_start
    s = script('top.rb', "def tick = 1\n5000.times { tick }\n")
    out, err, status = exec_tracer('--top', 'calls', '--json', '-x', RUBY, s, chdir: @dir)
    assert status.success?, err
    rows = JSON.parse(out.lines.last)['rows']
    tick = rows.find { |r| r['method'] == 'Object#tick' }
    assert tick, "no Object#tick row: #{rows}"
    assert_equal 5000, tick['count']
  end

  # On a pipe, a program that ends within an interval sends its counts once, as it ends: they
  # make one table, not the same table twice (the first on their arrival, the last at the end).
  # With a short interval, the tables come only once the program is there to count.
  def test_top_prints_a_table_once_when_nothing_changed_after_it
    s = script('once.rb', "def tick = 1\n5000.times { tick }\n")
    out, err, status = exec_tracer('--top', 'calls', '--interval', '60', '-x', RUBY, s, chdir: @dir)
    assert status.success?, err
    assert_equal 1, out.scan(/^tracer --top calls /).size, out
    assert_match(/^\S+once\.rb +1 +Object#tick +5000$/, out)
    out, err, status = exec_tracer('--top', 'calls', '--interval', '0.02', '-x', RUBY, s, chdir: @dir)
    assert status.success?, err
    assert_match(/\Atracer --top calls  pids: \d+ /, out, 'a table before the program connected')
  end
end
