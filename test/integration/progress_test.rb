# progress_test.rb: long work shows how far it has come on a terminal (every byte tracer writes
# to a tmux pane, recorded), and nothing of it reaches a pipe or a file.
require_relative 'helper'
require 'shellwords'

class ProgressTest < Minitest::Test
  include TracerTest

  # Strings enough for a heap dump of some 380 MB and a --memory walk of seconds: several
  # lines of progress at one every 0.2 s on any machine.
  OBJECTS = 1_500_000

  def setup
    super
    @dir = Dir.mktmpdir('tracer-progress')
    @tmux = nil
    File.write(File.join(@dir, 'big.rb'), <<~RUBY)
      $stdout.sync = true
      $keep = Array.new(#{OBJECTS}) { |i| "s\#{i}" }
      puts "ready \#{Process.pid}"
      sleep
    RUBY
  end

  def teardown
    super
    system('tmux', '-L', @tmux, 'kill-server', out: File::NULL, err: File::NULL) if @tmux
    FileUtils.rm_rf(@dir)
  end

  def big = target('big', script: File.join(@dir, 'big.rb'))

  # Runs tracer with args in a tmux pane: every byte it writes there, and its exit status.
  def on_a_terminal(*args)
    flunk 'tmux is not installed: it is needed to test what a terminal shows (apt-get install tmux)' unless system('tmux -V', out: File::NULL, err: File::NULL)
    @tmux = "tracer-progress-#{Process.pid}-#{rand(1 << 30)}"
    go, code, record = %w[go code record].map { |f| File.join(@dir, f) }
    # tracer starts once the recording has: it records from the first byte.
    cmd = "while [ ! -e #{go.shellescape} ]; do sleep 0.01; done; #{[TRACER, *args.map(&:to_s)].shelljoin}; " \
          "echo $? >#{code.shellescape}; sleep 600"
    assert system('tmux', '-L', @tmux, 'new-session', '-d', '-s', 'p', '-x', '200', '-y', '50', cmd), 'tmux new-session'
    assert system('tmux', '-L', @tmux, 'pipe-pane', '-t', 'p', '-o', "cat >>#{record.shellescape}"), 'tmux pipe-pane'
    FileUtils.touch(go)
    wait_until(message: 'tracer to exit') { File.size?(code) }
    # What tracer wrote is in the record once its pane shows it.
    wait_until(message: 'the recording') { File.read(record).include?("\r\n") }
    [File.read(record, mode: 'rb'), Integer(File.read(code))]
  end

  def test_heap_dump_shows_the_bytes_written_on_a_terminal
    t = big
    file = File.join(@dir, 'heap.json')
    screen, code = on_a_terminal('-p', t.pid, '--heapdump', file)
    assert_equal 0, code, screen
    shown = screen.scan(/\r\e\[Kwriting the dump of 1 process: ([\d.]+) MB/).flatten.map(&:to_f)
    assert_operator shown.size, :>=, 2, screen
    assert_equal shown.sort, shown, 'the bytes only grow'
    assert_operator shown.max, :>, 0, screen
    assert_operator shown.max * 1e6, :<=, File.size(file), 'no more than the file holds'
    # The line is taken away before the result is said.
    assert_match(/\r\e\[Kheap dump written to #{Regexp.escape(file)} \(\d+ bytes\)\r\n/, screen)
  end

  def test_memory_shows_the_time_so_far_on_a_terminal
    t = big
    screen, code = on_a_terminal('-p', t.pid, '--memory')
    assert_equal 0, code, screen
    shown = screen.scan(/\r\e\[Kwalking the heap of 1 process: ([\d.]+) s/).flatten.map(&:to_f)
    assert_operator shown.size, :>=, 1, screen
    assert_equal shown.sort, shown, 'the time only grows'
    assert_match(/\r\e\[Kmemory of process #{t.pid} \(ruby /, screen, 'the line is taken away before the report')
  end

  # On a pipe, and into a file, the same work says nothing while it goes on.
  def test_nothing_of_it_on_a_pipe
    t = big
    file = File.join(@dir, 'heap.json')
    out, err, status = tracer('-p', t.pid, '--heapdump', file)
    assert status.success?, err
    assert_equal "heap dump written to #{file} (#{File.size(file)} bytes)\n", out
    assert_empty err
    out, err, status = tracer('-p', t.pid, '--memory')
    assert status.success?, err
    refute_match(/walking|\e|\r/, out + err)
  end
end
