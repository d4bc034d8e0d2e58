# all.rb: runs every integration test file.
Dir[File.join(__dir__, '*_test.rb')].sort.each { |f| require f }
