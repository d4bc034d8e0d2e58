# eval_test.rb: -e, heap and shapes dumps, backtraces, --fork.
require_relative 'helper'
require_relative 'fake_client'

class EvalTest < Minitest::Test
  include TracerTest
  include FakeClient

  def test_eval_prints_inspect
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-e', '[Process.pid, "x" * 3]')
    assert status.success?, err
    assert_equal "=> [#{t.pid}, \"xxx\"]\n", out
  end

  def test_eval_exception_is_class_and_message_with_nonzero_exit
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-e', 'raise KeyError, "no such key"')
    refute status.success?
    assert_empty out
    assert_match(/KeyError: no such key/, err)
    assert t.alive?
  end

  def test_eval_of_100_kib
    t = target('busy')
    code = "x = 0\n" + ("x += 1\n" * 14_700) + 'x'
    assert_operator code.bytesize, :>, 100 * 1024
    out, err, status = tracer('-p', t.pid, '-e', code)
    assert status.success?, err
    assert_equal "=> 14700\n", out
  end

  def test_eval_runs_in_its_own_thread
    t = target('sleep')
    out, = tracer('-p', t.pid, '-e', '[Thread.current.name, Thread.current == Thread.main]')
    assert_equal "=> [\"tracer-eval\", false]\n", out
  end

  def test_heapdump_is_json_lines
    t = target('sleep')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'heap.json')
      out, err, status = tracer('-p', t.pid, '--heapdump', path)
      assert status.success?, err
      size = File.size(path)
      assert_match(/#{Regexp.escape(path)}.*#{size}/, out)
      lines = File.readlines(path)
      assert_operator lines.size, :>, 1000
      lines.each { |l| JSON.parse(l) }
      assert_equal 0o600, File.stat(path).mode & 0o777
      assert_empty Dir.glob("#{path}*.tmp")
    end
  end

  # Root asks, the process runs as www-data (here nobody), the directory is root's, 0755: the
  # process could not make a file there. tracer makes it and hands the process the descriptor,
  # so the dump is there, and it is the asker's.
  def test_heapdump_belongs_to_who_asked
    needs_root 'it runs the target as user nobody'
    t = target('sleep', prefix: AS_NOBODY)
    assert_equal Etc.getpwnam('nobody').uid, File.stat("/proc/#{t.pid}").uid
    Dir.mktmpdir do |dir|
      File.chmod(0o755, dir)
      path = File.join(dir, 'heap.json')
      out, err, status = tracer('-p', t.pid, '--heapdump', path)
      assert status.success?, err
      st = File.stat(path)
      assert_equal [0, 0, 0o600], [st.uid, st.gid, st.mode & 0o777]
      assert_equal "heap dump written to #{path} (#{st.size} bytes)\n", out
      lines = File.readlines(path)
      assert_operator lines.size, :>, 1000
      lines.each { |l| JSON.parse(l) }
      assert_equal ['heap.json'], Dir.children(dir)
    end
  end

  def test_heapdump_file_that_cannot_be_made_stops_before_attaching
    t = target('sleep')
    _, err, status = tracer('-p', t.pid, '--heapdump', '/nonexistent/heap.json')
    assert_equal 1, status.exitstatus
    assert_match(%r{cannot create the heap dump file beside '/nonexistent/heap.json': No such file or directory}, err)
    # The only session the target ever had is the one asking.
    assert_equal "=> 1\n", tracer('-p', t.pid, '-e', 'TracerAgent.stats[:sessions]').first
  end

  # Descriptors a client passes never stay in the process: the one no command took, extra ones,
  # the heap dump's when the client is gone before it is written, one sent with half a message.
  def test_passed_descriptors_are_closed_when_the_client_goes
    t = target('sleep')
    tracer('-p', t.pid, '-e', '1') # the first session leaves what every later one finds
    before = fds(t.pid).size
    hello = MiniPack.pack([1, PROTOCOL_VERSION, Process.pid])
    dump = MiniPack.pack([3, 1, 1, 'heap.json'])
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'passed')
      # [bytes, descriptors, how many the agent keeps while the client stays]
      [[hello, 1, 1], [hello, 3, 1], [hello + dump[0, 3], 1, 1], [hello + dump, 1, nil]].each do |bytes, n, kept|
        File.open(path, 'w') do |f|
          fake_client(t.pid) do |sock|
            sock.sendmsg(bytes, 0, nil, Socket::AncillaryData.unix_rights(*[f] * n))
            # nil: the heap dump takes it: the client dies at once, whatever the agent is doing.
            wait_until(message: "the agent to keep #{kept} of #{n}") { holding(t.pid, path) == kept } if kept
          end
        end
        wait_until(message: "#{n} descriptors closed after #{bytes.bytesize} bytes") do
          holding(t.pid, path).zero? && fds(t.pid).size == before
        end
      end
    end
    assert t.alive?
  end

  def test_backtraces_without_agent_threads
    t = target('threads')
    out, err, status = tracer('-p', t.pid, '--backtraces')
    assert status.success?, err
    assert_match(/^main/, out)
    assert_match(/^worker-0/, out)
    # Ruby's own lines, as the app's logs have them: `sleep' up to 3.3, 'Kernel#sleep' from 3.4.
    label = RUBY_VERSION >= '3.4' ? "'Kernel#sleep'" : "`sleep'"
    assert_match(/target\.rb:\d+:in #{Regexp.escape(label)}$/, out)
    refute_match(/tracer-agent|tracer-eval/, out)
  end

  def test_backtraces_of_n_frames
    t = target('threads')
    out, err, status = tracer('-p', t.pid, '--backtraces', '2')
    assert status.success?, err
    blocks = out.split("\n\n")
    assert_equal %w[main worker-0 worker-1 worker-2], blocks.map { |b| b[/\A\S+/] }.sort
    blocks.each { |b| assert_includes 1..2, b.lines.size - 1, b }
    assert_match(/^  .*target\.rb:\d+:in /, out)
    _, err, status = tracer('-p', t.pid, '--backtraces', '0')
    assert_equal 2, status.exitstatus
    assert_match(/invalid --backtraces frames '0'/, err)
  end

  # The main thread's stack where it sleeps, not the eval thread's (where rbtrace's `caller` looks).
  def test_backtrace_is_the_main_threads
    t = target('nested')
    out, err, status = tracer('-p', t.pid, '--backtrace', '3')
    assert status.success?, err
    lines = out.lines(chomp: true)
    assert_equal 3, lines.size, out
    # `sleep' up to Ruby 3.3, 'Kernel#sleep' from 3.4
    assert_match(/target\.rb:\d+:in [`'](Kernel#)?sleep'\z/, lines[0])
    assert_match(/target\.rb:\d+:in [`'](Object#)?inner_call'\z/, lines[1])
    assert_match(/target\.rb:\d+:in [`'](Object#)?middle_call'\z/, lines[2])
    refute_match(/tracer_agent|tracer -e/, out)
    assert_equal 5, tracer('-p', t.pid, '--backtrace', '100').first.lines.size
  end

  # A stopped copy, the target's child; it exits once continued, and the target reaps it.
  def test_fork_makes_a_stopped_copy_that_is_reaped
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '--fork')
    assert status.success?, err
    copy = Integer(out[/\Aprocess (\d+) is a copy of process #{t.pid}, stopped/, 1] || flunk(out))
    assert_match(/^  gdb -p #{copy} +look inside it/, out)
    assert_match(/^  kill -CONT #{copy} +let it go: it exits at once, and process #{t.pid} reaps it$/, out)
    stat = File.read("/proc/#{copy}/stat").sub(/\A.*\) /, '').split
    assert_equal ['T', t.pid.to_s], stat[0, 2], 'stopped, and a child of the target'
    # The thread that waits for it is the agent's: not among the app's threads.
    refute_match(/tracer-reaper/, tracer('-p', t.pid, '--backtraces').first)
    Process.kill('CONT', copy)
    wait_until(message: "copy #{copy} gone, reaped") { !File.exist?("/proc/#{copy}") }
    assert t.alive?
    assert_equal "=> []\n", tracer('-p', t.pid, '-e', 'Dir.children("/proc/self/task").map { |i| File.read("/proc/self/task/#{i}/children") }.join.split').first
  end

  # Ruby 3.2 and later dump their shapes; on an earlier Ruby (3.1 in the matrix) tracer says
  # why not, and leaves no file behind. Which of the two is decided by the target's version, not
  # by the respond_to? the agent itself asks, so an agent that wrongly says no fails here.
  def test_shapesdump_or_why_not
    t = target('sleep')
    version = tracer('-p', t.pid, '-e', 'RUBY_VERSION').first[/\A=> "(.+)"$/, 1] || flunk('no RUBY_VERSION')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'shapes.json')
      out, err, status = tracer('-p', t.pid, '--shapesdump', path)
      if Gem::Version.new(version) >= Gem::Version.new('3.2')
        assert status.success?, err
        assert_equal "shapes dump written to #{path} (#{File.size(path)} bytes)\n", out
        lines = File.readlines(path)
        refute_empty lines
        lines.each { |l| assert_kind_of Hash, JSON.parse(l) }
        assert_equal 0o600, File.stat(path).mode & 0o777
      else
        assert_equal 1, status.exitstatus
        assert_empty out
        assert_equal "tracer: shapes dump failed: NotImplementedError: this Ruby (#{version}) has no " \
                     "ObjectSpace.dump_shapes: object shapes came with Ruby 3.2\n", err
        refute File.exist?(path)
      end
      assert_empty Dir.glob("#{path}*.tmp")
    end
  end

  # Each eval's thread is the agent's while it runs, then garbage like any thread that ended:
  # 100 of them (50 lines of -i, each checked, then run) leave none behind.
  # An eval whose client is gone, by Ctrl-C or by SIGKILL, is interrupted in the process: its
  # thread ends (the one that counts is the only one left), and Ctrl-C says so.
  def test_eval_ends_with_its_client
    t = target('sleep')
    count = 'Thread.list.count { |th| th.name == "tracer-eval" }'
    %w[INT KILL].each_with_index do |sig, i|
      c = client('-p', t.pid, '-e', "$stdout.puts('sleeping #{i}'); sleep 1000")
      t.wait_for(/^sleeping #{i}$/)
      c.signal(sig)
      status = c.finish
      if sig == 'INT'
        assert_equal 1, status.exitstatus
        assert_equal "tracer: interrupted before process #{t.pid} answered: the code stops there too\n", c.err
      end
      wait_until(message: "the eval's thread gone after SIG#{sig}") do
        out, = tracer('-p', t.pid, '-e', count)
        out == "=> 1\n"
      end
    end
    assert t.alive?
  end

  def test_eval_threads_are_not_kept
    t = target('sleep')
    lines = "1\n" * 50 + "GC.start; ObjectSpace.each_object(Thread).count { |th| !th.alive? }\n"
    out, err, status = Open3.capture3(TRACER, '-p', t.pid.to_s, '-i', stdin_data: lines)
    assert status.success?, err
    assert_operator Integer(out.lines.last[/\d+/]), :<, 10, out.lines.last
  end

  def test_eval_can_be_disabled
    t = target('sleep', env: { 'TRACER_AGENT_EVAL' => '0' })
    _, err, status = tracer('-p', t.pid, '-e', '1')
    refute status.success?
    assert_match(/eval is disabled/, err)
  end
end
