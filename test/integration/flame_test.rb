# flame_test.rb: --format flamegraph, opened in a real browser, as a person would look at it.
#
# The browser is Debian's chromium (script/deps test installs it), headless, driven by
# test/export/browser.js over its DevTools pipe: it loads the file, takes screenshots, reads
# the pixels and the frames at points of the page, hovers, searches, clicks and presses
# Escape, and reports what it saw. The files themselves are read as XML (REXML), which also
# says they are well-formed.
require_relative 'helper'
require 'rexml/document'

BROWSER_JS = File.join(ROOT, 'test', 'export', 'browser.js')
CHROMIUM = ENV['CHROMIUM'] || '/usr/bin/chromium'
# Where the screenshots stay, to look at: FLAME_SHOTS=DIR keeps them (else a temporary directory).
FLAME_SHOTS = ENV['FLAME_SHOTS']

class FlameTest < Minitest::Test
  include TracerTest

  HOSTILE = ['Markup#<img src=x onerror=window.__pwned=1>', 'Markup#<script>window.__pwned=2</script>',
             'Markup#"onload="window.__pwned=3" x="'].freeze

  def setup
    super
    @dir = Dir.mktmpdir('tracer-flame')
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  # Traces pids with args into a flame graph file named name; returns its path.
  def flamegraph(pids, name, *args, duration: 1)
    path = File.join(@dir, name)
    _, err, status = tracer(*Array(pids).flat_map { |p| ['-p', p] }, *args, '--format', 'flamegraph', '-o', path,
                            '--duration', duration)
    assert status.success?, "exit #{status.exitstatus}: #{err}"
    path
  end

  # The frames of a file, as its XML says: name, where, x, v (value offsets), kind, fill, width.
  def frames(path)
    doc = REXML::Document.new(File.read(path))
    REXML::XPath.match(doc, "//*[local-name()='g'][@class='f']").map do |g|
      name, where, value = g.elements['title'].text.split("\n")
      rect = g.elements['rect']
      { name: name, where: where, value: value, x: Integer(g.attributes['data-x']), v: Integer(g.attributes['data-v']),
        kind: Integer(g.attributes['data-k']), fill: rect.attributes['fill'], width: Float(rect.attributes['width']),
        y: Integer(rect.attributes['y']), label: g.elements['text'].text.to_s }
    end
  end

  # What Chromium showed of the file: see test/export/browser.js.
  def look(path, name, *hostile)
    assert File.executable?(CHROMIUM), "no #{CHROMIUM}: script/deps test installs Debian's chromium"
    shots = FLAME_SHOTS || @dir
    FileUtils.mkdir_p(shots)
    png = File.join(shots, "#{self.class.name}-#{self.name}-#{File.basename(path)}.png")
    out, err, status = Open3.capture3('node', BROWSER_JS, path, png, name, *hostile)
    assert status.success?, "browser.js failed: #{err}"
    view = JSON.parse(out)
    view['screenshots'].each { |s| assert_operator File.size(s), :>, 1000, "screenshot #{s}" }
    view
  end

  def share(part, whole) = format('%.2f%%', 100.0 * part / whole)

  OWN_ELEMENTS = %w[html head meta title style body svg rect text foreignObject div input button span g script].freeze

  # Every element and attribute of the file is the page's own: none a name made, none that
  # fetches anything or handles an event; one script; no address in the style.
  def assert_only_own_markup(path)
    doc = REXML::Document.new(File.read(path))
    scripts = 0
    doc.root.each_recursive do |el|
      assert_includes OWN_ELEMENTS, el.name
      scripts += 1 if el.name == 'script'
      el.attributes.each_attribute do |a|
        refute_match(/\A(on|src\z|href\z|xlink:)/i, a.name, "attribute #{a.name} on #{el.name}")
        assert_includes [nil, 'http://www.w3.org/2000/svg', 'http://www.w3.org/1999/xhtml'], a.value if a.name == 'xmlns'
      end
    end
    assert_equal 1, scripts
    REXML::XPath.match(doc, "//*[local-name()='style']").each { |st| refute_match(/url\(|@import|@font-face/, st.text) }
  end

  # The hottest frame by self time, its label, its hover, its search and its zoom, in the
  # page a person opens; names that are markup stay text; nothing runs but the page's own.
  def check_in_browser(t, path, title: "tracer -f: process #{t.pid}")
    list = frames(path)
    root = list.first
    assert_equal 'all', root[:name]
    # Markup#spin under Markup#run, and maybe one at the top: a call of run that began before
    # the trace did.
    spins = list.select { |f| f[:name] == 'Markup#spin' }
    assert_includes 1..2, spins.size
    spin = spins.max_by { |f| f[:v] }
    hottest = list.max_by { |f| f[:value][/self ([\d.]+ \S+)/, 1].then { |s| s.to_f * { 's' => 1e9, 'ms' => 1e6, 'µs' => 1e3, 'ns' => 1 }.fetch(s.split.last) } }
    assert_equal 'Markup#spin', hottest[:name], 'the target spends most of its time in spin'
    HOSTILE.each { |n| assert list.any? { |f| f[:name] == n }, "no frame named #{n}: #{list.map { |f| f[:name] }}" }

    view = look(path, 'Markup#spin', *HOSTILE)
    assert_empty view['errors'], 'no script error'
    assert_empty view['console']
    assert_empty view['dialogs'], 'no name ran as script'
    assert_nil view['marker'], 'no name ran as script'
    assert_equal ["file://#{File.realpath(path)}"], view['requests'], 'nothing fetched but the file itself'
    assert_equal title, view['title']

    # The root spans the picture: its 1180 px between 10 px margins, drawn where it says.
    assert_in_delta 10, view['root']['x'], 0.5
    assert_in_delta view['svg']['width'] - 20, view['root']['width'], 0.5
    assert_equal({ 'pixel' => root[:fill], 'frame' => 'all', 'fill' => root[:fill] }, view['seen']['root'])

    # The hottest frame: drawn, its whole name as its label, in the viewport, seen on screen.
    f = view['frames']['Markup#spin']
    assert f['shown']
    assert_equal 'Markup#spin', f['label']
    assert_operator f['x'] + f['width'], :<=, view['viewport']['width']
    assert_operator f['y'] + f['height'], :<=, view['viewport']['height']
    assert_equal({ 'pixel' => spin[:fill], 'frame' => 'Markup#spin', 'fill' => spin[:fill] }, view['seen']['frame'])

    # Hover: full name, file:line, value with its unit, share.
    line = File.readlines(TARGET).index { |l| l =~ /^\s*def spin$/ } + 1
    assert_equal "Markup#spin  |  #{TARGET}:#{line}  |  #{spin[:value]}", view['details']
    assert_match(/\A[\d.]+ (ms|s) \(#{Regexp.escape(share(spin[:v], root[:v]))} of all\), self [\d.]+ (ms|s)\z/, spin[:value])

    # Search: found, highlighted, its share said.
    assert_equal "Matched: #{share(spins.sum { |f| f[:v] }, root[:v])} of all (#{spins.size} frames)", view['matched']
    assert_equal spins.size, view['highlighted']
    assert_equal 'rgb(230,0,230)', view['seen']['found']['pixel'], 'the match is drawn highlighted'

    # Click: the frame fills the width, its callers above it too; Escape: back.
    assert_in_delta view['svg']['width'] - 20, view['zoomed']['width'], 0.5
    assert_in_delta 10, view['zoomed']['x'], 0.5
    assert view['root_zoomed']['shown']
    assert_in_delta f['width'], view['unzoomed']['width'], 0.5

    # Names that are markup are text: shown as given, in titles and labels.
    HOSTILE.each do |n|
      h = view['frames'][n] or flunk("#{n} not in the page")
      assert_equal n, h['title'].split("\n").first
      label = h['label']
      assert(label == n || (label.end_with?('..') && n.start_with?(label[0..-3])) || label.empty?, "label #{label.inspect} of #{n}")
    end
    ctl = list.find { |x| x[:name].start_with?('Markup#ctl') } or flunk('no Markup#ctl...')
    assert_equal 'Markup#ctl\e[31m\xc2\x85\xe2\x80\xae', ctl[:name], 'controls escaped, the bidi override too'
    view
  end

  def test_flamegraph_html_in_chromium
    t = target('markup')
    path = flamegraph(t.pid, 'flame.html', '-f')
    text = File.read(path)
    assert text.start_with?("<!DOCTYPE html>\n<html"), text[0, 100]
    assert_only_own_markup(path)
    check_in_browser(t, path)
  end

  def test_flamegraph_svg_in_chromium
    t = target('markup')
    path = flamegraph(t.pid, 'flame.svg', '-f')
    assert File.read(path).start_with?('<?xml version="1.0" encoding="UTF-8"')
    assert_only_own_markup(path)
    check_in_browser(t, path)
  end

  # --top time: the agent counts each call path's self time, the client draws them at the end.
  def test_top_time_flamegraph_in_chromium
    t = target('markup')
    path = File.join(@dir, 'top.html')
    _, err, status = tracer('-p', t.pid, '--top', 'time', '--format', 'flamegraph', '-o', path, '--duration', 2)
    assert status.success?, err
    assert_only_own_markup(path)
    list = frames(path)
    run = list.find { |f| f[:name] == 'Markup#run' } or flunk(list.map { |f| f[:name] }.inspect)
    assert_equal 1, run[:y] - list.first[:y] - 16, 'Markup#run right under the root'
    check_in_browser(t, path, title: "tracer --top time: process #{t.pid}")
  end

  # --top time of two processes: merged, or one tree each with --split process.
  def test_top_time_flamegraph_of_processes
    a = target('threads')
    b = target('thread_jobs')
    merged = File.join(@dir, 'merged.svg')
    split = File.join(@dir, 'split.svg')
    [[merged], [split, '--split', 'process']].each do |file, *more|
      _, err, status = tracer('-p', a.pid, '-p', b.pid, '--top', 'time', '--format', 'flamegraph', '-o', file,
                              '--duration', 1, *more)
      assert status.success?, err
    end
    m = frames(merged)
    assert_equal 1, m.count { |f| f[:name] == 'Worker#work' }, m.map { |f| f[:name] }.inspect
    assert_equal 1, m.count { |f| f[:name] == 'Worker#helper' }
    s = frames(split)
    assert_equal ["ruby #{a.pid}", "ruby #{b.pid}"].sort, s.select { |f| f[:kind] == 7 }.map { |f| f[:name] }.sort
    assert_equal 2, s.count { |f| f[:name] == 'Worker#work' }
    work = m.find { |f| f[:name] == 'Worker#work' }
    assert_match(%r{\A#{Regexp.escape(TARGET)}:\d+\z}, work[:where])
    assert_equal 0, work[:kind], 'the app: under the targets\' working directory'
  end

  # --profile: the sampled stacks of every thread, wall-clock time; pseudo-frames in the colour
  # of what they are (waiting for the GVL, blocked), C methods apart; --split thread puts each
  # thread under a frame of its own.
  def test_profile_flamegraph
    t = target('all', script: File.join(ROOT, 'test', 'apps', 'profile_target.rb'))
    merged = File.join(@dir, 'profile.svg')
    split = File.join(@dir, 'threads.svg')
    [[merged], [split, '--split', 'thread']].each do |file, *more|
      _, err, status = tracer('-p', t.pid, '--profile', 'wall', '--format', 'flamegraph', '-o', file, '--duration', 2, *more)
      assert status.success?, err
    end
    m = frames(merged)
    names = m.map { |f| f[:name] }
    %w[Object#fifty Object#thirty Object#twenty Object#contender_a].each { |n| assert_includes names, n }
    assert_equal 0, m.find { |f| f[:name] == 'Object#fifty' }[:kind], 'the app'
    blocked = m.find { |f| f[:name].start_with?('(blocked') } or flunk("no (blocked...): #{names.uniq}")
    assert_equal 5, blocked[:kind], 'waiting'
    if Gem::Version.new(RUBY_VERSION) >= Gem::Version.new('3.2')
      gvl = m.find { |f| f[:name] == '(waiting for the GVL)' } or flunk("no GVL wait: #{names.uniq}")
      assert_equal 5, gvl[:kind], 'waiting'
    end
    assert_empty m.select { |f| f[:kind] == 7 }.map { |f| f[:name] }, 'one tree for every thread: no thread\'s frame'
    s = frames(split)
    top = s.first[:y]
    assert_equal ["ruby #{t.pid}"], s.select { |f| f[:y] == top + 17 }.map { |f| f[:name] }
    threads = s.select { |f| f[:y] == top + 34 }.map { |f| f[:name] }
    assert_operator threads.size, :>=, 4, "a frame per thread: #{threads}"
    assert_match(/tracer --profile wall: process #{t.pid}/, File.read(merged))
  end

  # Threads (and processes) are one picture by default; --split keeps them apart.
  def test_flamegraph_threads_merged_or_split
    a = target('threads')
    b = target('thread_jobs')
    merged = frames(flamegraph([a.pid, b.pid], 'merged.svg', '-m', 'Worker#work', 'Worker#helper'))
    assert_equal %w[Worker#work], merged.select { |f| f[:y] == merged.first[:y] + 17 }.map { |f| f[:name] }
    assert_equal 1, merged.count { |f| f[:name] == 'Worker#helper' }

    split = frames(flamegraph([a.pid, b.pid], 'split.svg', '-m', 'Worker#work', 'Worker#helper', '--split', 'thread'))
    top = split.first[:y]
    assert_equal ["ruby #{a.pid}", "ruby #{b.pid}"].sort, split.select { |f| f[:y] == top + 17 }.map { |f| f[:name] }.sort
    threads = split.select { |f| f[:y] == top + 34 }
    assert_equal 7, threads.first[:kind], 'a thread is a group frame'
    names = threads.map { |f| f[:name] }
    assert_equal %w[worker-0 worker-1 worker-2], names.grep(/worker/).sort
    assert_operator names.grep(/\Ajob-\d+\z/).size, :>=, 2, "threads that began and ended: #{names}"
    # Under each thread its calls: Worker#work, or Worker#helper alone for a call of work that
    # began before the trace did.
    threads.reject { |th| th[:name] == '(other)' }.each do |th|
      kids = split.select { |f| f[:y] == top + 51 && f[:x] >= th[:x] && f[:x] + f[:v] <= th[:x] + th[:v] }
      refute_empty kids, "nothing under #{th[:name]}"
      kids.each { |k| assert_includes %w[Worker#work Worker#helper], k[:name] }
    end

    by_process = frames(flamegraph([a.pid, b.pid], 'procs.svg', '-m', 'Worker#work', 'Worker#helper', '--split', 'process'))
    assert_equal 2, by_process.count { |f| f[:name] == 'Worker#work' }
  end

  # Frames under --min-share merge into one (other) per caller: the file stays small. Markup#run
  # calls four methods of about 10% each, and Markup#spin, about 55%.
  def test_flamegraph_min_share
    t = target('markup')
    all = flamegraph(t.pid, 'all.svg', '-f', '--min-share', '0')
    few = flamegraph(t.pid, 'few.svg', '-f', '--min-share', '15')
    every, merged = frames(all), frames(few)
    assert_operator every.size, :>, merged.size
    run = merged.find { |f| f[:name] == 'Markup#run' } or flunk('no Markup#run')
    other = merged.find { |f| f[:name] == '(other)' } or flunk("no (other): #{merged.map { |f| f[:name] }}")
    assert_equal run[:y] + 17, other[:y], '(other) is under the caller of what it merged'
    assert_equal 6, other[:kind]
    root = merged.first[:v]
    merged.each { |f| assert_operator f[:v], :>=, root * 0.15, "#{f[:name]} is under 15%" }
    assert_operator File.size(few), :<, File.size(all)
  end

  # Kinds, from each frame's file and name: the app's (under its working directory), C
  # methods, waiting.
  def test_flamegraph_kinds
    t = target('work')
    every = frames(flamegraph(t.pid, 'all.svg', '-f', '--all', '--yes', '--min-share', '0'))
    kind = ->(name) { (every.find { |f| f[:name] == name } or flunk("no #{name}: #{every.map { |f| f[:name] }.uniq}"))[:kind] }
    assert_equal 0, kind.call('Worker#work'), 'the app'
    assert_equal 5, kind.call('Kernel#sleep'), 'waiting'
    assert_equal 3, kind.call('Kernel#raise'), 'a C method'
    assert_equal '(a C method)', every.find { |f| f[:name] == 'Kernel#raise' }[:where]
  end

  def test_flamegraph_usage_errors
    pid = Process.pid
    [
      [['--top', 'calls', '--format', 'flamegraph'], /--format flamegraph goes with tracing, --top time or --profile/],
      [['--top', 'time', '--format', 'flamegraph', '--split', 'thread'], /--top time counts paths per process/],
      [['-m', 'A#b', '--split', 'thread'], /--split goes with --format collapsed or flamegraph/],
      [['-m', 'A#b', '--format', 'collapsed', '--min-share', '1'], /--min-share goes with --format flamegraph/],
      [['-m', 'A#b', '--format', 'flamegraph', '--min-share', '101'], /invalid --min-share '101'/],
      [['-m', 'A#b', '--format', 'flamegraph', '--split', 'fiber'], /invalid --split 'fiber': expected process or thread/],
      [['-m', 'A#b', '--format', 'flamegraph', '-o', '/dev/null', '-a'], /--append/],
    ].each do |args, message|
      _, err, status = tracer('-p', pid, *args)
      assert_equal 2, status.exitstatus, "#{args.join(' ')}: #{err}"
      assert_match message, err
    end
  end
end
