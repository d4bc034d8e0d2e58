# profile_test.rb: --top profile against a workload whose split is known (test/apps/profile_target.rb).
require_relative 'helper'

class ProfileTest < Minitest::Test
  include TracerTest

  PROFILE_TARGET = File.join(ROOT, 'test', 'apps', 'profile_target.rb')
  # The VM's thread events (Ruby 3.2+) tell waiting for the GVL from being blocked.
  GVL_EVENTS = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new('3.2')
  # The stack of a thread blocked since before the profile began (rb_profile_thread_frames).
  BLOCKED_STACKS = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new('3.3')

  def profile_target(mode, env: {}, agent: true)
    target(mode, script: PROFILE_TARGET, env: env, agent: agent)
  end

  # The rows of --top profile --json's final table, by frame label.
  def profile_rows(pid, *args)
    out, err, status = tracer('-p', pid, '--profile', *args, '--json', '--rows', '1000')
    assert status.success?, err
    table = JSON.parse(out.lines.last)
    assert_equal 'profile', table['mode']
    [table, table['rows'].group_by { |r| r['frame'] }.transform_values { |rs| rs.sum { |r| r['self_ms'] } }]
  end

  # Self time of the three methods until they have enough samples between them, as shares in
  # percent, and how many samples they took (a loaded machine gives the target little CPU: the
  # profile goes on for longer).
  def split_shares(pid, *args, samples:, within: 300)
    sums = Hash.new(0.0)
    count = 0
    deadline = Time.now + within
    while count < samples && Time.now < deadline
      table, = profile_rows(pid, *args, '--duration', '4')
      table['rows'].each do |r|
        next unless %w[Object#fifty Object#thirty Object#twenty].include?(r['frame'])

        sums[r['frame']] += r['self_ms']
        count += r['count']
      end
    end
    assert_operator count, :>=, samples, "only #{count} samples of the split in #{within} s"
    total = sums.values.sum
    [sums.transform_values { |v| 100.0 * v / total }, count]
  end

  # A share estimated from n samples is off by sqrt(p(1-p)/n) at one standard deviation (the
  # ticks fall at random in the methods' turns): 10,000 samples put four deviations of the 50%
  # share at 2 points, the bound the profiler must hold, so that a test fails on a bias, not on
  # chance (1,500 samples failed one run in eight on chance alone).
  SAMPLES_FOR_TWO_POINTS = 10_000

  def assert_split(shares, count, within: 2.0)
    { 'Object#fifty' => 50, 'Object#thirty' => 30, 'Object#twenty' => 20 }.each do |frame, truth|
      assert_in_delta truth, shares[frame], within, "#{frame} in #{count} samples: #{shares.inspect}"
    end
  end

  # --top time's shares of the three methods: its self time is wall-clock time, into which
  # the machine's other processes' turns fall, a few long ones in a window on a loaded machine
  # (3 s windows at a load average of 11 read 46-52% for fifty): the median of eight windows'
  # shares, which such a turn moves in one window only.
  def exact_shares(pid)
    windows = Array.new(8) do
      out, err, status = tracer('-p', pid, '--top', 'time', '--duration', '1.5', '--json', '--filter', PROFILE_TARGET)
      assert status.success?, err
      rows = JSON.parse(out.lines.last)['rows'].to_h { |r| [r['method'], r['self_ms']] }
      exact = %w[Object#fifty Object#thirty Object#twenty].to_h { |m| [m, rows.fetch(m, 0.0)] }
      total = exact.values.sum
      exact.transform_values { |v| 100.0 * v / total }
    end
    %w[Object#fifty Object#thirty Object#twenty].to_h { |m| [m, windows.map { |w| w[m] }.sort[3, 2].sum / 2] }
  end

  # At 1 kHz, within 2 points of the truth; and the exact table of the same methods, through
  # their wrappers (--top time), says the same.
  def test_cpu_split_within_two_points_and_agrees_with_top_time
    t = profile_target('split')
    exact = exact_shares(t.pid)
    sampled, count = split_shares(t.pid, '--hz', '1000', samples: SAMPLES_FOR_TWO_POINTS)
    # The figures, for the log of each Ruby's run (docs/profiler.md).
    warn format("\n[split] %s%s: 1 kHz, %d samples: %s; --top time: %s", RUBY_DESCRIPTION,
                ENV['RUBY_YJIT_ENABLE'] == '1' ? ' YJIT' : '', count,
                sampled.values_at(*%w[Object#fifty Object#thirty Object#twenty]).map { |v| v.round(2) }.join('/'),
                exact.values_at(*%w[Object#fifty Object#thirty Object#twenty]).map { |v| v.round(2) }.join('/'))
    assert_split(sampled, count)
    exact.each { |m, share| assert_in_delta share, sampled[m], 3.0, "#{m}: exact #{exact}, sampled #{sampled}" }
  end

  # At the default rate (100 Hz) a 2-point answer takes 100 s of the target's CPU: 2,000
  # samples hold the shares to four deviations, 4.5 points, which a bias of the rate's own (a
  # tick that lands on the same code each time) would still break.
  def test_cpu_split_at_the_default_rate
    t = profile_target('split')
    sampled, count = split_shares(t.pid, samples: 2000)
    assert_split(sampled, count, within: 400 * Math.sqrt(0.25 / count))
  end

  # Wall-clock time: every thread, running or not, adds up to the time it was sampled.
  def test_wall_covers_every_thread
    t = profile_target('all')
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'p.folded')
      out, err, status = tracer('-p', t.pid, '--profile', 'wall', '--duration', '3', '--format', 'collapsed', '-o', file)
      assert status.success?, err + out
      by_thread = Hash.new { |h, k| h[k] = Hash.new(0) }
      File.foreach(file) do |line|
        stack, weight = line.chomp.rpartition(' ').values_at(0, 2)
        entry = stack.split(';').find { |f| f =~ /^Object#(splitter|sleeper|contender_a|contender_b)$/ }
        next unless entry

        kind = stack.end_with?('(waiting for the GVL)') ? :gvl : stack.include?('(blocked') ? :blocked : :running
        by_thread[entry][kind] += Integer(weight)
      end
      # Before Ruby 3.3 (no rb_profile_thread_frames), a thread blocked since before the
      # profile began has no stack yet: its time is a "(blocked...)" of its own, as the main
      # thread's (in Thread#join) and the sleeper's are.
      threads = %w[Object#contender_a Object#contender_b Object#sleeper Object#splitter]
      unless BLOCKED_STACKS
        bare = File.readlines(file).grep(/\A\(blocked[^;]*\) \d+$/).sum { |l| Integer(l[/\d+$/]) }
        assert_in_delta 6.0, bare / 1e9, 1.2, File.read(file)
        threads.delete('Object#sleeper')
      end
      assert_equal threads, by_thread.keys.sort
      by_thread.each do |entry, kinds|
        total = kinds.values.sum / 1e9
        # Each thread's samples add up to the time sampled, whatever it did.
        assert_in_delta 3.0, total, 0.6, "#{entry}: #{kinds}"
      end
      next unless GVL_EVENTS

      sleeper = by_thread['Object#sleeper']
      assert_operator sleeper[:blocked], :>, 0.95 * sleeper.values.sum, "sleeper: #{sleeper}"

      # Three threads want the GVL: each waits for it, and none holds it all the time.
      %w[Object#contender_a Object#contender_b Object#splitter].each do |entry|
        kinds = by_thread[entry]
        assert_operator kinds[:gvl], :>, 0.25 * kinds.values.sum, "#{entry}: #{kinds}"
        assert_operator kinds[:running], :>, 0.1 * kinds.values.sum, "#{entry}: #{kinds}"
      end
    end
  end

  # A long C method gets its own time: the stack is taken where the thread is, not at the next
  # safe point (which would give it to the Ruby method after it).
  def test_c_method_gets_its_own_time
    t = profile_target('sort')
    table, self_ms = profile_rows(t.pid, '--duration', '3', '--hz', '250')
    sort = self_ms.fetch('Array#sort!') { flunk "no Array#sort! row: #{table['rows'].first(5)}" }
    after = self_ms.fetch('Object#after_sort', 0)
    assert_operator sort, :>, 10 * after, table['rows'].first(8).inspect
  end

  # Rails' and ActiveJob's notifications tag the samples taken while a request or job runs:
  # a row per controller#action or job class, and a pprof label.
  def test_requests_and_jobs_tag_samples
    t = profile_target('requests')
    table, = profile_rows(t.pid, '--duration', '3', '--hz', '250')
    requests = table['rows'].select { |r| r['file'] == '(request)' }.to_h { |r| [r['frame'], r['total_ms']] }
    assert_equal %w[ReportJob ReportsController#show UsersController#index], requests.keys.sort, table['rows'].inspect
    Dir.mktmpdir do |dir|
      pprof = File.join(dir, 'p.pb.gz')
      _, err, status = tracer('-p', t.pid, '--profile', '--duration', '2', '--format', 'pprof', '-o', pprof)
      assert status.success?, err
      tags = `go tool pprof -tags #{pprof} 2>&1`
      assert_match(/request: Total/, tags)
      assert_match(/UsersController#index/, tags)
    end
    # Nothing of the app's notifications stays subscribed once the profile has ended (a thread
    # of the agent's unsubscribes: wait for it).
    listening = 'ActiveSupport::Notifications.notifier.listening?("start_processing.action_controller")'
    deadline = Time.now + WAIT
    loop do
      out, err, status = tracer('-p', t.pid, '-e', listening)
      assert status.success?, err
      break if out == "=> false\n"
      flunk "still subscribed: #{out}" if Time.now > deadline
      sleep 0.1
    end
  end

  # An app's own profiler on SIGPROF (stackprof) and tracer's both get their samples.
  def test_stackprof_in_the_same_process
    begin
      require 'stackprof'
    rescue LoadError => e
      skip "stackprof does not load in this Ruby (#{e.message}): script/deps test installs Debian's"
    end
    t = profile_target('stackprof')
    t.puts('report') # stackprof starts again: what it counts next is from the window below
    t.wait_for(/stackprof samples: \d+/)
    table, self_ms = profile_rows(t.pid, '--duration', '3', '--hz', '250')
    assert_operator table['events'], :>, 0
    assert self_ms.key?('Object#fifty'), table['rows'].first(5).inspect
    t.puts('report')
    t.wait_for(/stackprof samples: \d+\n.*stackprof samples: \d+/m)
    n = Integer(t.out.scan(/stackprof samples: (\d+)/).last.first)
    # stackprof keeps one sample in flight and loses the ticks that come meanwhile: on a busy
    # machine it takes some 100 a CPU second, with tracer or without.
    assert_operator n, :>=, 10, t.out
    assert t.alive?
  end

  def test_files_open_in_their_viewers
    t = profile_target('split')
    Dir.mktmpdir do |dir|
      pprof = File.join(dir, 'p.pb.gz')
      out, err, status = tracer('-p', t.pid, '--profile', '--duration', '2', '--format', 'pprof', '-o', pprof)
      assert status.success?, err + out
      go = `go tool pprof -top #{pprof} 2>&1`
      assert $?.success?, go
      assert_match(/^Type: cpu$/, go)
      assert_match(/Object#fifty$/, go)
      raw = `go tool pprof -raw #{pprof} 2>&1`
      assert_match(/^PeriodType: cpu nanoseconds$/, raw)
      assert_match(/^Period: 10000000$/, raw)
      assert_match(/thread:\[splitter\]/, raw)
      speedscope = File.join(dir, 'p.json')
      out, err, status = tracer('-p', t.pid, '--profile', 'wall', '--duration', '2', '--format', 'speedscope', '-o', speedscope)
      assert status.success?, err + out
      doc = JSON.parse(File.read(speedscope))
      assert_equal 'sampled', doc['profiles'][0]['type']
      assert_equal doc['profiles'][0]['samples'].size, doc['profiles'][0]['weights'].size
      names = doc['shared']['frames'].map { |f| f['name'] }
      assert_includes names, 'Object#fifty'
    end
  end

  # A process that never loaded the agent: tracer loads it, then profiles as in any other.
  def test_profile_of_a_process_without_the_agent
    t = profile_target('split', agent: false)
    table, self_ms = profile_rows(t.pid, '--duration', '2', '--hz', '250')
    assert_operator table['events'], :>, 0
    assert self_ms.key?('Object#fifty'), table['rows'].first(5).inspect
  end

  # Nothing of the profiler stays after detach, and the next session starts from nothing.
  def test_nothing_left_after_detach
    t = profile_target('split')
    3.times do
      _, err, status = tracer('-p', t.pid, '--profile', 'wall', '--duration', '0.5', '--hz', '500')
      assert status.success?, err
    end
    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats[:hooks]')
    assert status.success?, err
    assert_equal "=> 0\n", out
    out, = tracer('-p', t.pid, '-e', 'Thread.list.map(&:name).sort.join(",")')
    refute_match(/tracer-sampler/, out)
    tids = Dir.children("/proc/#{t.pid}/task").map { |id| File.read("/proc/#{t.pid}/task/#{id}/comm").strip rescue '' }
    refute_includes tids, 'tracer-sampler'
  end

  # A fork gets no tick of its parent's profile, and a process that execs survives the ticks on
  # their way (SIGURG does nothing by default).
  def test_fork_and_exec_while_profiled
    t = profile_target('forker')
    c = client('-p', t.pid, '--profile', 'wall', '--hz', '1000')
    c.wait_for(/attached to process/)
    t.puts('fork')
    t.wait_for(/forks: 20 ok/, within: 120)
    t.puts('exec')
    t.wait_for(/exec'd and alive/)
    assert t.alive?
  end
end
