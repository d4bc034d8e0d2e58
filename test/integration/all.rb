# all.rb: runs every integration test file, and names each test that was skipped, and why, at
# the end (minitest says only how many without --verbose): a skip is a test that did not run.
Dir[File.join(__dir__, '*_test.rb')].sort.each { |f| require f }

module NameSkips
  SKIPPED = []

  def skip(msg = nil, *)
    SKIPPED << "#{self.class}##{name}: #{msg}"
    super
  end
end
Minitest::Test.prepend(NameSkips)
Minitest.after_run do
  next if NameSkips::SKIPPED.empty?

  puts "\nSkipped, and why:"
  NameSkips::SKIPPED.uniq.each { |s| puts "  SKIPPED #{s}" }
end
