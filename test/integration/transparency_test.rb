# transparency_test.rb: what the app sees of tracing: nothing it calls behaves otherwise, and
# nothing of tracer's piles up from one session to the next.
require_relative 'helper'

class TransparencyTest < Minitest::Test
  include TracerTest

  APP = File.join(ROOT, 'test', 'apps', 'kernel_methods.rb')

  # One round of the app's calls: everything it printed up to END.
  def round(t)
    seen = t.out.size
    t.puts('go')
    t.wait_for(/\A.{#{seen}}.*^END$/m)
    t.out[seen..].sub(/^END\n.*/m, '')
  end

  # Every public method of Kernel, BasicObject, Object, Module and Class, and the private ones a
  # program calls without a receiver (block_given?, binding, caller, raise...), return the same
  # while every method of those modules is wrapped as before and after, on this Ruby. Those a
  # wrapper would change (they read their caller's frame) are left out, and tracer says which.
  def test_core_methods_return_the_same_while_every_one_is_traced
    t = target('', script: APP)
    before = round(t)
    refute_match(/MISSING/, before, 'the app calls every public method this Ruby has')
    c = client('-p', t.pid, '-m', 'Kernel#', 'BasicObject#', 'Object#', 'Module#', 'Class#', '--yes')
    c.wait_for(/attached to process #{t.pid}/)
    traced = round(t)
    c.wait_for(/^\s*Kernel#format <[\d.]+>$/)
    c.signal('INT')
    assert c.finish.success?, c.err
    after = round(t)
    assert_equal before, traced, 'while traced'
    assert_equal before, after, 'after detach'
    kernel = c.err[/^\*\*\* Kernel#: not traced: (.*)$/, 1] or flunk("no note of what Kernel# left out: #{c.err}")
    frame = kernel[/(?:\A|; )([^;]*) \(it reads its caller's frame, which a wrapper would hide\)/, 1].to_s.split(', ')
    assert_empty %w[block_given? binding local_variables __method__ caller caller_locations eval raise proc lambda] - frame, kernel
    assert_match(/\bobject_id\b[^;]* \(Ruby warns against redefining it\)/, kernel)
    assert_match(/^\*\*\* BasicObject#: not traced: .*\b__send__\b.*\binstance_eval\b/, c.err)
    assert_empty t.err, 'no warning in the app\'s log'
  end

  # Finding the app's methods calls none of them: a Rails model's .inspect may query the
  # database, in the middle of whatever request the install interrupted, and any module may
  # define is_a?. --ignore matches labels, which tracer makes itself.
  def test_finding_the_apps_methods_calls_none_of_them
    Dir.mktmpdir('tracer-transparency') do |dir|
      File.write(File.join(dir, 'model.rb'), <<~'RUBY')
        $stdout.sync = true
        class Model
          def self.inspect = ($inspected = ($inspected || 0) + 1) && 'Model(id: integer)'
          def self.is_a?(mod) = ($is_a = ($is_a || 0) + 1) && super
          def self.find(id) = id
          def name = 'm'
        end
        puts "ready #{$$}"
        loop do
          Model.find(1)
          Model.new.name
          sleep 0.01
        end
      RUBY
      t = target('', script: 'model.rb', chdir: dir)
      c = client('-p', t.pid, '-f', '--ignore', 'Nothing', '--ignore', 'Model#name')
      c.wait_for(/^Model\.find <[\d.]+>$/)
      c.signal('INT')
      assert c.finish.success?, c.err
      refute_match(/Model#name/, c.out, '--ignore left it out')
      out, err, status = tracer('-p', t.pid, '-e', '[$inspected, $is_a]')
      assert status.success?, err
      assert_equal "=> [nil, nil]\n", out
    end
  end

  # Issue 23. The install runs in slices, each often on the app's own thread (a postponed job),
  # at whatever point that thread was: there the block of the method the app is in is the
  # app's, and no C call of the agent's may pass it on. Making a Wrappers module did
  # (rb_class_new_instance hands the current frame's block to initialize, and Module#initialize
  # runs it): on Redmine, the block ActiveRecord's #[] gives LazyAttributeSet#fetch_value ran
  # so, and one request in a few installs failed (MissingAttributeError for a column the query
  # had returned; a ReflectionProxy without #type, as when Delegator's `__getobj__ { r = false }`
  # runs). Here the app spends its time in a method whose block it never calls, in a loop whose
  # backward branch is where the job runs, while forty classes of its own get their Wrappers
  # module: before the fix, the block ran once for each of the 41.
  def test_the_install_never_calls_the_block_of_the_method_the_app_is_in
    Dir.mktmpdir('tracer-transparency') do |dir|
      File.write(File.join(dir, 'spin.rb'), <<~'RUBY')
        $stdout.sync = true
        $foreign = 0
        40.times { |i| Object.const_set(:"Owner#{i}", Class.new { def work = 1 }) }
        class Worker
          def spin
            n = 0
            n += 1 while n < 100_000
            n
          end
        end
        worker = Worker.new
        puts "ready #{$$}"
        loop { worker.spin { $foreign += 1 } }
      RUBY
      t = target('', script: 'spin.rb', chdir: dir)
      c = client('-p', t.pid, '-f')
      c.wait_for(/^Worker#spin <[\d.]+>$/)
      c.signal('INT')
      assert c.finish.success?, c.err
      out, err, status = tracer('-p', t.pid, '-e', '$foreign')
      assert status.success?, err
      assert_equal "=> 0\n", out, 'times the agent called the block Worker#spin was given'
    end
  end

  # Under -f the agent reads the text of each exception the app raises. On Ruby 3.1, a
  # NameError's #message runs did_you_mean's spell check and error_highlight's parse of the
  # file that raised, and leaves @corrections on the exception: the app's own rescue saw an
  # instance variable it never set, and a raise under -f cost some 250 us instead of 3. The
  # trace gives the text without those, on every Ruby, and leaves the exception as it was.
  def test_reading_an_exception_leaves_it_as_the_app_raised_it
    Dir.mktmpdir('tracer-transparency') do |dir|
      File.write(File.join(dir, 'raises.rb'), <<~'RUBY')
        $stdout.sync = true
        $marked = 0
        class Door
          def open = 1
        end
        puts "ready #{$$}"
        loop do
          begin
            Door.new.opne
          rescue NoMethodError => e
            $marked += 1 unless e.instance_variables.empty?
          end
          sleep 0.001
        end
      RUBY
      t = target('', script: 'raises.rb', chdir: dir)
      c = client('-p', t.pid, '-f')
      c.wait_for(/^EXCEPTION NoMethodError: undefined method .opne. for .*Door.*raises\.rb:9\)$/)
      c.signal('INT')
      assert c.finish.success?, c.err
      assert_empty c.out.lines.grep(/Did you mean|\^\^\^/), "did_you_mean's and error_highlight's lines in the trace"
      out, err, status = tracer('-p', t.pid, '-e', '$marked')
      assert status.success?, err
      assert_equal "=> 0\n", out, 'exceptions the app rescued with an instance variable it never set'
    end
  end

  # Twenty sessions of every mode that wraps methods leave each class as the first one did:
  # the same methods, the same ancestors (a Wrappers module in front of each class traced once),
  # no hook; attach takes as long, and the process stays as lean: its RSS grows no more than
  # that of the same program run beside it untraced, give or take 1 MiB. With YJIT, the code it
  # compiles again for the callers of what was wrapped is its own, counted apart
  # (docs/performance.md gives what it comes to). So is Ruby 3.1's transient heap: the first
  # session that finds the app's methods makes many small arrays at once, and the pages of the
  # pool they took stay resident (some 1.4 MiB here, once; no later session adds to it).
  def test_twenty_sessions_leave_nothing_that_grows
    t = target('signatures')
    quiet = target('signatures')
    modes = [%w[-f], %w[--top calls], %w[--top time], %w[-s 1000], %w[-m Sig#], %w[-m Sig.]]
    probes = []
    quiet_probes = []
    times = []
    probe = lambda do |target|
      seen = target.out.size
      target.puts('probe')
      target.wait_for(/\A.{#{seen}}.*^probe (.*)$/m)
      eval(target.out[seen..][/^probe (.*)$/, 1]) # rubocop:disable Security/Eval
    end
    20.times do |i|
      args = modes[i % modes.size]
      start = Time.now
      c = client('-p', t.pid, *args, '--duration', '0.3')
      c.wait_for(/attached to process/)
      times << Time.now - start
      assert c.finish.success?, "#{args.join(' ')}: #{c.err}"
      probes << probe.call(t)
      quiet_probes << probe.call(quiet)
    end
    assert_equal [probes.first[0]] * 20, probes.map(&:first), 'what each class holds, session after session'
    assert_equal [0] * 20, probes.map { |p| p[1] }, 'no hook is left'
    rss = probes.map { |p| p[2] - p[3] - p[4] }
    quiet_rss = quiet_probes.map { |p| p[2] - p[3] - p[4] }
    # YJIT's allocations take more RSS than the bytes it counts: in plain Ruby with no agent,
    # 1.19x to 1.65x of them (test/bench/redefine_cost.rb; docs/performance.md). Here, on 3.4.5,
    # the rest grew 210-673 KiB from the 2nd session to the 20th while YJIT's count grew some
    # 930 KiB, and kept growing with it over 60 sessions; without YJIT it stops after a few.
    yjit_slack = ((probes.last[3] - probes.first[3]) * 0.65).round
    assert_operator (rss.last - rss.first) - (quiet_rss.last - quiet_rss.first), :<, 1024 + yjit_slack,
                    "RSS in KiB (less YJIT's and the transient heap's) after each session: #{rss.inspect}; " \
                    "untraced beside it: #{quiet_rss.inspect}; YJIT's: #{probes.map { |p| p[3] }.inspect}; " \
                    "the transient heap's: #{probes.map { |p| p[4] }.inspect}"
    # A floor of 3 s: a loaded machine makes any five attaches slow, growth or not.
    assert_operator times.last(5).sum / 5, :<, [times.first(5).sum / 5 * 3, 3.0].max, "attach times: #{times.map { |x| x.round(3) }.inspect}"
    refute_match(/MISMATCH/, t.out)
  end
end
