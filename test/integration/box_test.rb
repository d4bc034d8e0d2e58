# box_test.rb: Ruby::Box (Ruby 4.0, RUBY_BOX=1), which keeps the classes an app defines in a
# box of its own apart from the main box the agent runs in, and gives a builtin class reopened
# there methods that box alone sees. A class of such a box is traced as that box sees it; a
# builtin class's method that only another box has is refused, naming the box, rather than
# awaited. Before 4.0 (no Ruby::Box) the same names are what they always were: a class not
# defined (yet), a method no class has.
require_relative 'helper'

class BoxTest < Minitest::Test
  include TracerTest

  BOXES = File.join(ROOT, 'test', 'apps', 'boxes.rb')
  BOX = !!defined?(Ruby::Box)

  def boxes = target('', script: BOXES, env: { 'RUBY_BOX' => '1', 'RUBYOPT' => '-W:no-experimental' })

  def test_a_class_of_another_box_is_traced_as_that_box_sees_it
    t = boxes
    unless BOX
      assert_match(/without Ruby::Box/, t.out)
      out, err, status = tracer('-p', t.pid, '-m', 'Boxed#work', '--duration', '0.3')
      assert status.success?, err
      assert_match(/^\*\*\* Boxed#work: no class or module named Boxed yet: its methods are traced once it is defined$/, err)
      refute_match(/Boxed#work </, out)
      return
    end
    assert_match(/in #<Ruby::Box:\d+,user,main>, and #<Ruby::Box:\d+,user,optional>/, t.out)
    c = client('-p', t.pid, '-m', 'Boxed#work', 'Worker#work')
    c.wait_for(/^Boxed#work <[\d.]+>\n(?:.|\n)*^Worker#work <[\d.]+>\n|^Worker#work <[\d.]+>\n(?:.|\n)*^Boxed#work <[\d.]+>\n/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    box = t.out[/and (#<Ruby::Box:\d+,user,optional>)/, 1]
    assert_match(/^\*\*\* Boxed#work: the class of #{Regexp.escape(box)}, traced as that box sees it$/, c.err)
    # Once detached, the box's class is as it was: no wrapper left in its ancestry.
    out, err, status = tracer('-p', t.pid, '-e', 'ObjectSpace.each_object(Ruby::Box).filter_map { |b| b.const_get(:Boxed) if b.const_defined?(:Boxed) }.map { |k| k.instance_method(:work).owner }')
    assert status.success?, err
    assert_equal "=> [Boxed]\n", out
  end

  def test_a_builtin_method_only_another_box_has_is_refused_naming_the_box
    t = boxes
    out, err, status = tracer('-p', t.pid, '-m', 'String#shout', '--duration', '0.3')
    refute status.success?, "#{out}#{err}"
    refute_match(/String#shout </, out)
    unless BOX
      assert_match(/^\*\*\* String#shout: matched no method$/, err)
      return
    end
    box = t.out[/and (#<Ruby::Box:\d+,user,optional>)/, 1]
    main = t.out[/in (#<Ruby::Box:\d+,user,main>)/, 1]
    assert_match(/^\*\*\* String#shout: String#shout is defined in #{Regexp.escape(box)} only: a builtin class reopened in a Ruby::Box has methods of that box's own, which tracer, in #{Regexp.escape(main)}, cannot wrap$/, err)
  end
end
