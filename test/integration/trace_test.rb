# trace_test.rb: method traces, firehose, slow calls, exceptions, threads and the output options.
require_relative 'helper'

class TraceTest < Minitest::Test
  include TracerTest

  def trace(t, *args, until_re:)
    c = client('-p', t.pid, *args)
    c.wait_for(until_re)
    c.signal('INT')
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    assert_match(/\*\*\* detached from process #{t.pid}/, c.err)
    c.out
  end

  def test_instance_method_is_a_leaf_with_duration
    t = target('work')
    out = trace(t, '-m', 'Worker#helper', until_re: /Worker#helper <\d+\.\d{9}>\n.*Worker#helper <\d+\.\d{9}>\n/m)
    assert_match(/^Worker#helper <0\.\d{9}>$/, out)
    refute_match(/Worker#work/, out)
  end

  def test_nested_methods_make_a_tree
    t = target('work')
    out = trace(t, '-m', 'Worker#work', 'Worker#helper', until_re: /^Worker#work <[\d.]+>\n/m)
    assert_match(/^Worker#work\n  Worker#helper <[\d.]+>\nWorker#work <[\d.]+>$/, out)
  end

  def test_singleton_method
    t = target('work')
    out = trace(t, '-m', 'Worker.build', until_re: /^Worker\.build <[\d.]+>\n.*^Worker\.build <[\d.]+>\n/m)
    refute_match(/Worker#/, out)
  end

  # -m 'Issue.find', where find comes from a module the class extends (ActiveRecord's way): the
  # calls on Issue are traced, shown as the user named them, and tracer says where it is from.
  def test_a_method_named_on_a_class_that_inherits_it
    t = target('finders')
    c = client('-p', t.pid, '-m', 'Issue.find')
    c.wait_for(/^Issue\.find <[\d.]+>\n.*^Issue\.find <[\d.]+>$/m)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_match(/^\*\*\* Issue\.find: defined in Finders#find$/, c.err)
    refute_match(/Account|Finders#find </, c.out)
  end

  def test_bare_name_matches_every_receiver
    t = target('work')
    out = trace(t, '-m', 'nap', until_re: /^Worker#nap <[\d.]+>\n.*^Worker\.nap <[\d.]+>\n/m)
    assert_equal ['Worker#nap', 'Worker.nap'], out.scan(/^(Worker[#.]nap) </).flatten.uniq.sort
    refute_match(/Worker#work|Kernel#sleep/, out)
  end

  def test_all_methods_of_a_class
    t = target('work')
    out = trace(t, '-m', 'Worker#', until_re: /Worker#inner.*Worker#fail_once.*Worker#nap/m)
    %w[work helper outer inner fail_once nap].each { |m| assert_match(/^\s*Worker##{m}\b/, out) }
    refute_match(/Worker\.build/, out)
  end

  # The app aliases a method while -m wraps it: the alias is the wrapper then, and must behave
  # as the original once the client has gone, never raise into the app.
  def test_alias_of_a_wrapped_method_made_while_attached_works_after_detach
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'alias')
      t = target('alias', env: { 'ALIAS_FILE' => file })
      c = client('-p', t.pid, '-m', 'Hash#key?')
      c.wait_for(/Hash#key\? <[\d.]+>/)
      File.write(file, '')
      t.wait_for(/aliased/)
      c.signal('INT')
      assert c.finish.success?, c.err
      out, err, status = tracer('-p', t.pid, '-e', '[{ 1 => 2 }.old_key?(1), { 1 => 2 }.old_key?(3), { 1 => 2 }.key?(1)]')
      assert status.success?, err
      assert_equal "=> [true, false, true]\n", out
      refute_match(/raised/, t.out)
      assert t.alive?
    end
  end

  # Whatever implements them (C, or Ruby with YJIT on 3.4), these core methods are traced alike.
  def test_array_each_map_select
    t = target('each')
    out = trace(t, '-m', 'Array#each', 'Array#map', 'Array#select',
                until_re: /^Array#each <[\d.]+>\n.*^Array#map <[\d.]+>\n.*^Array#select <[\d.]+>\n/m)
    refute_match(/EXCEPTION/, out)
    out, err, status = tracer('-p', t.pid, '-e', '[[1, 2].map { _1 * 2 }, [1, 2].select(&:even?), Array.instance_method(:each).source_location]')
    assert status.success?, err
    assert_match(/\A=> \[\[2, 4\], \[2\], (nil|\["<internal:array>", \d+\])\]\n\z/, out)
  end

  # Calls in a second Ractor are not traced, are said not to be, and the app runs on.
  def test_ractor_app_keeps_running_and_is_told_about
    t = target('ractor')
    c = client('-p', t.pid, '-m', 'Worker#work(@n)')
    c.wait_for(/(Worker#work\(@n=1\) <[\d.]+>\n.*){3}/m)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_match(/process #{t.pid} runs 2 Ractors: only the main one is traced/, c.err)
    refute_match(/@n=2/, c.out)
    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats[:other_ractor_calls].positive?')
    assert status.success?, err
    assert_equal "=> true\n", out, "the other Ractor's calls were seen and left out"
    assert t.alive?
    refute_match(/Error|died/, t.err)
  end

  # Wrappers bind every kind of parameter, block and keyword exactly as the methods do, and
  # private and protected methods stay so: the app (target.rb signatures) compares each call's
  # result with its untraced first round, while every method of the class is traced.
  def test_wrappers_are_transparent_for_every_signature
    t = target('signatures')
    c = client('-p', t.pid, '-m', 'Sig#', 'SigChild#')
    c.wait_for(/SigChild#yields\n  Sig#yields <[\d.]+>\nSigChild#yields <[\d.]+>\n/)
    rounds = t.out.scan(/rounds (\d+)/).flatten.last.to_i
    t.wait_for(/rounds #{rounds + 200}/)
    c.signal('INT')
    assert c.finish.success?, c.err
    %w[req opt rest post kw kwrest blk yields fwd anon nokw last_hash if []= + q? priv calls_priv prot calls_prot].each do |m|
      assert c.out.match?(/^\s*Sig##{Regexp.escape(m)} <[\d.]+>$/), "Sig##{m} was not traced"
    end
    rounds = t.out.scan(/rounds (\d+)/).flatten.last.to_i
    t.wait_for(/rounds #{rounds + 100}/) # and after detach
    refute_match(/MISMATCH/, t.out)
    assert_empty t.err
    out, err, status = tracer('-p', t.pid, '-e', '[Sig, SigChild].map { |c| [c.instance_method(:req).arity, c.instance_method(:kw).parameters, c.ancestors.first(2).map(&:inspect)] }')
    assert status.success?, err
    assert_equal '=> [[2, [[:req, :a], [:keyreq, :k], [:key, :j]], ["#<TracerAgent::Wrappers of Sig>", "Sig"]], ' \
                 "[2, [[:req, :a], [:keyreq, :k], [:key, :j]], [\"#<TracerAgent::Wrappers of SigChild>\", \"SigChild\"]]]\n", out,
                 'the originals are back, as they were; an empty module of tracer\'s stays in front of each class'
  end

  # Methods a spec names stay traced however they come: a class defined after attach, a class
  # reloaded (a new class object of the same name), a traced method defined again.
  def test_late_reloaded_and_redefined_methods_stay_traced
    Dir.mktmpdir do |dir|
      files = %w[late late2].map { |n| File.join(dir, n) }
      t = target('late', env: { 'LATE_FILE' => files[0], 'LATE_FILE2' => files[1] })
      c = client('-p', t.pid, '-m', 'Late#hop', 'Worker#nap')
      c.wait_for(/Late#hop: no class or module named Late yet: its methods are traced once it is defined/)
      c.wait_for(/^Worker#nap <[\d.]+>$/)
      File.write(files[0], '')
      t.wait_for(/defined/)
      c.wait_for(/^Late#hop <[\d.]+>$/)
      File.write(files[1], '')
      t.wait_for(/redefined/)
      seen = c.out.size
      c.wait_for(/\A.{#{seen}}.*^Late#hop <[\d.]+>$.*^Worker#nap <[\d.]+>$/m)
      c.signal('INT')
      assert c.finish.success?, c.err
      out, err, status = tracer('-p', t.pid, '-e', '[Worker.new(1).nap(0), Late.new.hop, Worker.instance_method(:nap).owner]')
      assert status.success?, err
      assert_equal "=> [:redefined, 2, Worker]\n", out, 'the new definitions work, and no wrapper is left in place' 
      refute_match(/Error/, t.err)
    end
  end

  # The app takes Method objects of traced methods (memoized handlers, callbacks): those are
  # the wrappers, and must go on working once tracer has gone, after any number of sessions.
  def test_methods_the_app_took_while_traced_work_after_detach
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'call')
      t = target('capture', env: { 'CALL_FILE' => file })
      2.times do
        c = client('-p', t.pid, '-m', 'Worker#helper', 'Worker#q?')
        c.wait_for(/^Worker#q\? <[\d.]+>$/)
        c.signal('INT')
        assert c.finish.success?, c.err
      end
      File.write(file, '')
      t.wait_for(/captured methods work|a captured method raised/)
      said = t.out.match(/^\d+ captured methods work, (\d+) of them wrappers, (\d+) different$/) or flunk(t.out)
      wrappers, different = said.captures
      assert_operator Integer(wrappers), :>=, 4, 'it took some of both sessions\' wrappers'
      assert_equal 2, Integer(different), 'one wrapper per method, whichever session put it in place'
      out, err, status = tracer('-p', t.pid, '-e', '(Worker.private_instance_methods(false) + Worker.instance_methods(false)).grep(/tracer/)')
      assert status.success?, err
      assert_equal "=> []\n", out, 'nothing of tracer\'s in the class itself'
  
    end
  end

  def test_c_method
    t = target('work')
    out = trace(t, '-m', 'Kernel#sleep', until_re: /Kernel#sleep <[\d.]+>\n/)
    assert_match(/^Kernel#sleep <\d+\.\d{9}>$/, out)
  end

  def test_expressions_at_call_time
    t = target('work')
    out = trace(t, '-m', 'Worker#work(self, x, @n, x + 1, __source__)', until_re: /Worker#work\(.*\) <[\d.]+>\n/)
    assert_match(/^Worker#work\(self=#<Worker:0x\h+ @n=1>, x=3, @n=1, x \+ 1=4, __source__="[^"]+target\.rb:\d+"\) <[\d.]+>$/, out)
  end

  def test_exception_in_place
    t = target('work')
    out = trace(t, '-m', 'Worker#fail_once', until_re: /EXCEPTION.*\n.*Worker#fail_once/)
    assert_match(/^Worker#fail_once\n  EXCEPTION ArgumentError: worker failed \(#{Regexp.escape(TARGET)}:\d+\)\nWorker#fail_once <[\d.]+>$/, out)
  end

  # Every line of a multi-line message keeps the [PID] prefix and the indent of its EXCEPTION
  # line, under which it goes; the location stays on the first line.
  def test_multiline_exception_message_keeps_the_tree
    a = target('multiline')
    b = target('multiline')
    c = client('-p', a.pid, '-p', b.pid, '-m', 'Worker#misspelt', 'Worker#fail_lines')
    [a, b].each { |t| c.wait_for(/^\[#{t.pid}\] Worker#fail_lines <[\d.]+>\n/) }
    c.signal('INT')
    assert c.finish.success?, c.err
    lines = c.out.lines
    bad = lines.reject { |l| l =~ /\A\[(#{a.pid}|#{b.pid})\] \S|\A\[(#{a.pid}|#{b.pid})\]   \S|\A\[(#{a.pid}|#{b.pid})\] {13}/ }
    assert_empty bad, "lines without their prefix and indent:\n#{c.out}"
    [a, b].each do |t|
      p = Regexp.escape("[#{t.pid}]")
      assert_match(/^#{p} Worker#fail_lines\n#{p}   EXCEPTION ArgumentError: first line \(#{Regexp.escape(TARGET)}:\d+\)\n#{p} {13}second line\n#{p} Worker#fail_lines <[\d.]+>$/, c.out)
      assert_match(/^#{p} Worker#misspelt\n#{p}   EXCEPTION NoMethodError: undefined method .helpr. for [^\n]*\(#{Regexp.escape(TARGET)}:\d+\)\n(#{p} {13}.*\S\n)*#{p} Worker#misspelt <[\d.]+>$/, c.out)
    end
    # The text is the message without did_you_mean's suggestions, on every Ruby: 3.1's decorate
    # #to_s, and the agent asks it for #original_message (transparency_test.rb says why).
    refute_match(/Did you mean/, c.out)
  end

  # By default the firehose is the app's own methods (here: test/apps, under the target's
  # working directory), through wrappers that leave nothing behind.
  def test_firehose_shows_the_apps_methods
    t = target('work')
    out = trace(t, '-f', until_re: /^Worker#outer\n  Worker#inner <[\d.]+>\n  Worker#inner <[\d.]+>\nWorker#outer <[\d.]+>\n/)
    assert_match(/^Worker#work\n  Worker#helper <[\d.]+>\nWorker#work <[\d.]+>\n/, out)
    assert_match(/^Worker#fail_once\n  EXCEPTION ArgumentError: worker failed .*\nWorker#fail_once <[\d.]+>\n/, out)
    refute_match(/Integer#|Kernel#/, out)
    out, err, status = tracer('-p', t.pid, '-e', '[TracerAgent.stats[:hooks], Worker.instance_method(:work).source_location[0]]')
    assert status.success?, err
    assert_equal "=> [0, #{File.join(ROOT, 'test/apps/target.rb').inspect}]\n", out
  end

  def test_firehose_with_all_shows_ruby_and_c_calls
    t = target('work')
    out = trace(t, '-f', '--all', '--yes', until_re: /Integer#\*/)
    assert_match(/^Worker#work\n  Worker#helper\n    Integer#\* <[\d.]+>\n  Worker#helper <[\d.]+>\n/, out)
    assert_match(/EXCEPTION ArgumentError: worker failed/, out)
  end

  def test_all_is_asked_for_and_refused_without_yes
    t = target('work')
    out, err, status = tracer('-p', t.pid, '-f', '--all')
    assert_equal 2, status.exitstatus, err
    assert_match(/Ruby keeps part of those hooks after tracer detaches/, err)
    assert_match(/not attached: add --yes/, err)
    assert_empty out
    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats[:sessions]')
    assert status.success?, err
    assert_equal "=> 1\n", out, 'nothing attached before'
  end

  # Integer#+ is one of the VM's basic operations: wrapping it leaves its slow path for good,
  # so tracer asks first; with --yes it traces it like any method (Worker#work's `+ 1`). On the
  # steady target: in the busy one's flood, a loaded machine kept the agent from confirming the
  # detach within the client's 1.8 s (what the CPU-bound target gets of a CPU then is little).
  def test_basic_operation_is_asked_for_then_traced
    t = target('work')
    out, err, status = tracer('-p', t.pid, '-m', 'Integer#+')
    assert_equal 2, status.exitstatus, err
    assert_match(/'Integer#\+' names an operation Ruby's VM runs without a method call/, err)
    assert_match(/not attached: add --yes/, err)
    assert_empty out
    out = trace(t, '-m', 'Worker#work', 'Integer#+', '--yes', until_re: /^Worker#work\n  Integer#\+ <[\d.]+>\nWorker#work <[\d.]+>\n/)
    assert_match(/^Worker#work\n  Integer#\+ <[\d.]+>\nWorker#work <[\d.]+>$/, out)
    out, err, status = tracer('-p', t.pid, '-e', '[1 + 1, TracerAgent.stats[:sessions]]')
    assert status.success?, err
    assert_equal "=> [2, 2]\n", out, "the refused client never attached (a trace and this eval only); Integer#+ works after detach"
  end

  def test_slow_calls_only
    t = target('work')
    out = trace(t, '-s', '1', '-m', 'Worker#outer', 'Worker#inner', 'Kernel#sleep',
                until_re: /^Worker#outer <[\d.]+>\n/)
    refute_match(/Worker#work/, out)
    # Each over 1 ms; how far over is the machine's (a sleep of 1 ms took 25 at load 13).
    assert_match(/^    Kernel#sleep <\d+\.\d{9}>\n  Worker#inner <\d+\.\d{9}>\n/, out)
    assert_match(/^Worker#outer <\d+\.\d{9}>$/, out)
  end

  # --slowcpu counts the CPU time of the call's thread: a spin of 30 ms shows with that time, a
  # sleep as long does not; -s, wall-clock time, shows both. --slow-methods is -s -m.
  def test_slow_by_cpu_time
    t = target('cpu')
    out = trace(t, '--slowcpu', '20', '--slow-methods', 'Cpu#spin', 'Cpu#nap',
                until_re: /(^Cpu#spin <[\d.]+>\n.*){3}/m)
    refute_match(/Cpu#nap/, out)
    out.scan(/^Cpu#spin <([\d.]+)>$/).flatten.each { |d| assert_in_delta 0.03, Float(d), 0.015 }
    out = trace(t, '-s', '20', '--slow-methods', 'Cpu#spin', 'Cpu#nap',
                until_re: /^Cpu#nap <[\d.]+>\n.*^Cpu#spin <[\d.]+>\n.*^Cpu#nap <[\d.]+>\n/m)
    out.scan(/^Cpu#nap <([\d.]+)>$/).flatten.each { |d| assert_operator Float(d), :>=, 0.03 }
    _, err, status = tracer('-p', t.pid, '-s', '--slowcpu')
    assert_equal 2, status.exitstatus
    assert_match(/\Atracer: -s measures wall-clock time, --slowcpu CPU time: give one\n/, err)
  end

  def test_no_duration_start_time_and_indent
    t = target('work')
    out = trace(t, '-n', '-t', '-r', '4', '-m', 'Worker#work', 'Worker#helper', until_re: /^ {16}Worker#work\n/)
    assert_match(/^\d\d:\d\d:\d\d\.\d{6} Worker#work\n\d\d:\d\d:\d\d\.\d{6}     Worker#helper\n {16}Worker#work$/, out)
    refute_match(/<\d/, out)
  end

  def test_output_file
    t = target('work')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'trace.txt')
      c = client('-p', t.pid, '-m', 'Worker#helper', '-o', path)
      wait_until(message: 'trace in file') { File.exist?(path) && File.read(path) =~ /Worker#helper <[\d.]+>\n/ }
      c.signal('TERM')
      assert c.finish.success?
      assert_empty c.out
      assert_match(/detached from process #{t.pid}/, c.err)
    end
  end

  # A trace to a file goes through a spool (client/output/spool.c), formatted as it comes or after a
  # flood: either way the file holds every event tracer received, once and in order.
  def test_output_file_has_every_event_received
    t = target('bursts')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'trace.txt')
      _, err, status = tracer('-p', t.pid, '-n', '-m', 'Worker#work', 'Worker#helper', '--stats', '--duration', '0.5',
                              '-o', path)
      assert status.success?, err
      counts = err.match(/(\d+) events sent, (\d+) received/) or flunk("no --stats line in #{err}")
      sent, received = counts.captures.map(&:to_i)
      assert_equal sent, received, err
      assert_operator received, :>, 1000, err
      text = File.read(path)
      assert_empty Dir.children(dir) - ['trace.txt'], 'no scratch file left'
      # One call tree per work call, four events each; --duration may cut the last one short,
      # and the first may be a return whose call came before tracing started.
      trees = text.scan(/^Worker#work\n  Worker#helper\nWorker#work\n\n/).size
      assert_in_delta received, 4 * trees, 6, "#{received} events received, #{trees} call trees in the file"
      assert_match(/\A(Worker#work\n|  Worker#helper\n|\n)+\z/, text)
    end
  end

  # -o FILE.gz and FILE.zst: the same text as a plain file, compressed as it is written; with
  # --append, one more gzip member or zstd frame, which the tools read on as one text.
  def test_compressed_output
    t = target('work')
    Dir.mktmpdir do |dir|
      unzip = { '.gz' => %w[gzip -dc], '.zst' => %w[zstd -dcq] }
      read = ->(path) { unzip[File.extname(path)] ? IO.popen([*unzip[File.extname(path)], path], &:read) : File.read(path) }
      code = '(1..300).map { |i| "line #{i}" }'
      paths = ['', '.gz', '.zst'].map { |ext| File.join(dir, "eval.txt#{ext}") }
      paths.each do |path|
        _, err, status = tracer('-p', t.pid, '-e', code, '-o', path)
        assert status.success?, err
      end
      plain = read.call(paths[0])
      assert_match(/\A=> \["line 1", .*"line 300"\]\n\z/, plain)
      paths.drop(1).each { |path| assert_equal plain, read.call(path), path }
      assert_operator File.size(paths[1]), :<, plain.size / 2, 'compressed'

      traces = ['', '.gz', '.zst'].map { |ext| File.join(dir, "trace.txt#{ext}") }
      traces.each do |path|
        _, err, status = tracer('-p', t.pid, '-n', '-m', 'Worker#work', 'Worker#helper', '--duration', '1.5', '-o', path)
        assert status.success?, err
      end
      # The same kind of trace, complete lines; --duration may end it inside a call.
      texts = traces.map { |path| read.call(path) }
      texts.each { |text| assert_match(/\AWorker#work\n  Worker#helper\nWorker#work\n\n(Worker#work\n|  Worker#helper\n|\n)+\z/, text) }
      assert_equal [texts[0].lines.uniq.sort] * 3, texts.map { |text| text.lines.uniq.sort }

      paths.drop(1).each do |path|
        _, err, status = tracer('-p', t.pid, '-e', '1 + 1', '-o', path, '--append')
        assert status.success?, err
        assert_equal "#{plain}=> 2\n", read.call(path), "#{path} appended to"
      end
    end
  end

  # -m that matches nothing says so once every process has answered, and exits with 1: with one
  # process, with several, with several specs; but not while any spec matches in any process.
  def test_specs_that_match_nothing_anywhere
    a = target('work')
    out, err, status = tracer('-p', a.pid, '-m', 'Worker#nope')
    assert_equal 1, status.exitstatus, err
    assert_match(/^\*\*\* Worker#nope: matched no method$/, err)
    assert_match(/^tracer: no method matches -m Worker#nope in process #{a.pid}$/, err)
    assert_match(/^\*\*\* detached from process #{a.pid}$/, err)
    assert_empty out

    b = target('work')
    _, err, status = tracer('-p', a.pid, '-p', b.pid, '-m', 'Worker#nope', 'Worker.nope')
    assert_equal 1, status.exitstatus, err
    assert_match(/^\*\*\* \[#{b.pid}\] Worker\.nope: matched no method$/, err)
    assert_match(/^tracer: no method matches -m Worker#nope, Worker\.nope in any of the 2 processes$/, err)

    # A class not defined yet is not a mistake: it may be loaded later, and is traced then.
    _, err, status = tracer('-p', a.pid, '-m', 'Nope.x', '--duration', '0.5')
    assert_equal 0, status.exitstatus, err
    assert_match(/^\*\*\* Nope\.x: no class or module named Nope yet: its methods are traced once it is defined$/, err)

    _, err, status = tracer('-p', a.pid, '-p', b.pid, '-m', 'Worker#nope', 'Worker#helper', '--duration', '0.5')
    assert_equal 0, status.exitstatus, err
    assert_match(/^\*\*\* no method matches Worker#nope in any of the 2 processes$/, err)

    c = target('calls', env: { 'GO' => File.join(Dir.tmpdir, "never-#{a.pid}") }, script: File.join(ROOT, 'test', 'apps', 'top_target.rb'))
    _, err, status = tracer('-p', a.pid, '-p', c.pid, '-m', 'Burst#tick', '--duration', '0.5')
    assert_equal 0, status.exitstatus, err
    assert_match(/^\*\*\* \[#{a.pid}\] Burst#tick: no class or module named Burst yet: its methods are traced once it is defined$/, err)
    refute_match(/^tracer:/, err)
  end

  def test_duration_detaches
    t = target('work')
    out, err, status = tracer('-p', t.pid, '-m', 'Worker#helper', '--duration', '0.5')
    assert status.success?, err
    assert_match(/Worker#helper <[\d.]+>/, out)
    assert_match(/detached from process #{t.pid}/, err)
    assert t.alive?
    out, = tracer('-p', t.pid, '-e', 'TracerAgent.attached?')
    assert_equal "=> true\n", out
  end

  def test_threads_each_have_their_own_nesting
    t = target('threads')
    out = trace(t, '-m', 'Worker#work', 'Worker#helper',
                until_re: /(\[worker-\d\] Worker#work <[\d.]+>\n.*){6}/m)
    lines = out.lines.grep(/^\[worker-\d\]/)
    by_thread = lines.group_by { |l| l[/^\[(worker-\d)\]/, 1] }
    assert_operator by_thread.size, :>=, 2
    by_thread.each_value do |ls|
      depth = 0
      ls.each do |l|
        body = l.sub(/^\[worker-\d\] /, '')
        indent = body[/^ */].size / 2
        if body =~ /Worker#work <|Worker#helper </ && indent == depth - 1 && body !~ /Worker#helper <.*/
          depth -= 1
        end
        assert_includes [0, 1], indent, l
      end
    end
  end

  # Threads that begin and end while traced: THREAD BEGIN at the left with the thread's
  # #inspect (where it was made; a thread that names itself in its block has no name yet), its
  # calls under its name, then THREAD END under its name, the same thread (address). JSONL
  # shows both as events of their own.
  def test_threads_beginning_and_ending
    t = target('thread_jobs')
    out = trace(t, '-m', 'Worker#work', until_re: /(THREAD END .*\n.*){3}/m)
    lines = out.lines(chomp: true)
    jobs = lines.each_index.filter_map do |i|
      addr = lines[i][/^THREAD BEGIN #<Thread:(0x\h+) /, 1] or next
      j = (i + 1...lines.size).find { |k| lines[k].include?("THREAD END #<Thread:#{addr}@") } or next
      [lines[i], lines[i + 1...j], lines[j]]
    end
    assert_operator jobs.size, :>=, 2, out
    jobs.each do |first, between, last|
      assert_match(/^THREAD BEGIN #<Thread:0x\h+ #{Regexp.escape(TARGET)}:\d+ run>$/, first)
      name = last[/@(job-\d+) /, 1]
      assert_match(/^(\[#{name}\] )?THREAD END #<Thread:0x\h+@#{name} #{Regexp.escape(TARGET)}:\d+ run>$/, last)
      assert_equal 1, between.grep(/^(\[#{name}\] )?Worker#work <\d+\.\d{9}>$/).size, out
    end
    jsonl = trace(t, '-m', 'Worker#work', '--format', 'jsonl', until_re: /"event":"thread_begin".*"event":"thread_end".*\n/m)
    assert_match(/^\{"pid":#{t.pid},"thread":null,"event":"thread_begin","ts":-?\d+,"depth":0,"text":"#<Thread:0x\h+ /, jsonl)
    assert_match(/^\{"pid":#{t.pid},"thread":"job-\d+","event":"thread_end","ts":\d+,"depth":0,"text":"#<Thread:0x\h+@job-\d+ /, jsonl)
  end

  def test_several_processes_prefix_lines_with_the_pid
    a = target('work')
    b = target('work')
    c = client('-p', a.pid, '-p', b.pid, '-m', 'Worker#helper')
    c.wait_for(/\[#{a.pid}\] Worker#helper <[\d.]+>\n/)
    c.wait_for(/\[#{b.pid}\] Worker#helper <[\d.]+>\n/)
    c.signal('INT')
    assert c.finish.success?
    assert_match(/detached from process #{a.pid}/, c.err)
    assert_match(/detached from process #{b.pid}/, c.err)
  end

  def test_target_exits_mid_trace
    t = target('exit_when_told')
    c = client('-p', t.pid, '-m', 'Worker#work')
    c.wait_for(/Worker#work/)
    t.puts('exit')
    status = c.finish
    assert_match(/\*\*\* process #{t.pid} exited/, c.err)
    assert_equal 3, status.exitstatus
    assert_empty leftovers_for(t.pid)
  end

  def test_fork_child_never_streams_into_parent_client
    t = target('fork')
    t.wait_for(/child (\d+)/)
    child = t.out[/child (\d+)/, 1].to_i
    c = client('-p', t.pid, '-m', 'Worker#helper', 'Worker#work')
    c.wait_for(/(Worker#work\n  Worker#helper <[\d.]+>\nWorker#work <[\d.]+>\n.*){3}/m)
    c.signal('INT')
    assert c.finish.success?
    # The child calls only Worker#helper, at depth 0; the parent only inside Worker#work.
    refute_match(/^Worker#helper/, c.out)
    out, = tracer('-p', child, '-e', 'Process.pid')
    assert_equal "=> #{child}\n", out
  end
end
